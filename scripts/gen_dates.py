#!/usr/bin/env python3
"""A small fine-tuning task shipped with the repo: write dates like "March 5, 2021" as ISO 8601 "2021-03-05".

Writes data/dates/{train,eval,test}.jsonl ({"prompt", "response"} lines, the format `gemma train --data` reads):
400 training, 60 evaluation and 50 test examples, all different dates between 1900 and 2099 (seed 7).
Run from the repository root: python3 scripts/gen_dates.py   (standard library only)
"""
import datetime
import json
import os
import random

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "data", "dates")
SIZES = {"train": 400, "eval": 60, "test": 50}
PROMPT = "Convert this date to ISO 8601 (YYYY-MM-DD): {}"


def main():
    rng = random.Random(7)
    start, days = datetime.date(1900, 1, 1), (datetime.date(2099, 12, 31) - datetime.date(1900, 1, 1)).days
    picked = set()
    while len(picked) < sum(SIZES.values()):
        picked.add(start + datetime.timedelta(days=rng.randrange(days + 1)))
    dates = sorted(picked)
    rng.shuffle(dates)
    os.makedirs(OUT, exist_ok=True)
    i = 0
    for name, n in SIZES.items():
        with open(os.path.join(OUT, name + ".jsonl"), "w") as f:
            for d in dates[i:i + n]:
                text = f"{d.strftime('%B')} {d.day}, {d.year}"
                f.write(json.dumps({"prompt": PROMPT.format(text), "response": d.isoformat()}) + "\n")
        i += n


if __name__ == "__main__":
    main()
