"""The prompts of the gemma3_270m fixtures (text only; token ids are made by gen_real_refs.py with Google's
tokenizer.json through HF `tokenizers`, BOS (id 2) prepended by hand)."""

STORY = (
    "The lighthouse keeper had lived on the island for thirty-one years, and in all that time he had never "
    "once missed lighting the lamp at dusk. Every evening he climbed the one hundred and twelve steps of the "
    "spiral staircase, polished the great glass lens with a soft cloth, trimmed the wick, and checked the "
    "clockwork that turned the light in slow, patient circles across the water. Ships passed in the night "
    "without ever knowing his name. Fishermen from the mainland sometimes left him bread, apples and "
    "newspapers that were already a week old, and he read every page of them, even the advertisements for "
    "farm machinery and the tide tables for harbours he would never visit. In winter the storms came from the "
    "north-west, throwing spray as high as the gallery, and the whole tower hummed like a plucked string. In "
    "summer the sea lay flat and silver, and seals hauled themselves onto the rocks below the keeper's "
    "cottage to sleep in the sun. One autumn morning a letter arrived from the harbour authority. The light, "
    "it said, would be automated in the spring. An engineer would come to install an electric lamp, a timer "
    "and a radio beacon, and the keeper would be offered a pension and a small house in the town. He read "
    "the letter twice, folded it carefully, and put it in the drawer with his logbooks. Then he went outside "
    "and stood for a long time looking at the horizon, where"
)

LONG = (
    "Chapter One. The Map in the Attic\n\n"
    "Nobody in the village of Ashcombe remembered who had built the old mill house on the hill, but everyone "
    "agreed that it was the strangest building for twenty miles in any direction. Its walls leaned in three "
    "different directions at once, its chimney was made of river stones that did not come from any river "
    "nearby, and its single round window faced north, towards the moor, as if the house were waiting for "
    "someone to arrive from that empty country. When Margaret Hale inherited the house from a great-aunt she "
    "had met only twice, she expected to sell it within a month. Instead she found herself, on a wet Tuesday "
    "in March, kneeling in the attic beside a cedar chest whose lid was carved with birds, fish and a pattern "
    "of interlocking circles.\n\n"
    "Inside the chest, under a layer of moth-eaten blankets, lay a leather folder tied with green ribbon. The "
    "folder held a map drawn in brown ink on heavy paper. It showed the village, the mill house and the moor "
    "beyond, but it also showed things that Margaret was certain did not exist: a second bridge over the "
    "stream below the church, a standing stone at the crossroads, and a path that ran from the back door of "
    "the mill house straight across the moor to a spot marked only with a small drawing of a key. Along the "
    "margin someone had written, in a careful, old-fashioned hand, a list of numbers: 7, 12, 3, 19, 4, 11.\n\n"
    "Margaret was an accountant by training, and numbers did not frighten her. She copied the list into her "
    "notebook, photographed the map with her phone, and carried the folder downstairs to the kitchen, where "
    "the light was better. Over a pot of tea she compared the map with a modern one. The church was in the "
    "right place, and so were the post office, the pub and the three farms along the lane. The stream "
    "followed the same curve. But where the old map showed a second bridge, the modern map showed nothing but "
    "a ford, and the crossroads had no stone at all.\n\n"
    "The next morning she walked down to the stream. The water was high after the rain, brown and fast, and "
    "it took her some time to find what she was looking for. Half buried in the bank, covered with moss and "
    "ivy, were the worn remains of a stone pier, squared off by human hands. A second one stood on the far "
    "side. Someone, long ago, had built a bridge here, exactly where the map said it would be. Margaret stood "
    "in the drizzle for a long while, listening to the water, and then she went to the crossroads. There was "
    "no standing stone, but in the hedge beside the signpost she found a low block of granite, tipped on its "
    "side, with a circle cut into its face. It was the same interlocking circle that decorated the lid of the "
    "cedar chest.\n\n"
    "That evening she sat at the kitchen table with the map, the list of numbers and a glass of red wine. "
    "Seven, twelve, three, nineteen, four, eleven. They were not dates, because nineteen was too large for a "
    "month. They were not map coordinates, because the map had no grid. She tried letters of the alphabet and "
    "got G, L, C, S, D, K, which meant nothing. She tried counting paces, steps and fence posts. At midnight, "
    "tired and a little annoyed, she turned the map over and noticed, for the first time, that the back of "
    "the paper was not blank. Very faintly, in pencil, someone had drawn a grid of squares, and in some of the "
    "squares there were tiny numbers. The first square she looked at contained the number seven"
)

# name, text, store full-vocabulary logits (float16)?
PROMPTS = [
    ("bos_only", "", False),
    ("bos_one", "The", True),
    ("capital", "The capital of France is", False),
    ("chat", "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n", True),
    ("code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n        return n\n", True),
    ("german", "Die Hauptstadt von Deutschland ist Berlin. Die Hauptstadt von Frankreich ist", False),
    ("japanese", "日本の首都は東京です。フランスの首都は", False),
    ("mixed_bytes", "Emoji test: 👋🌍✨ — tabs\tand  double  spaces, ünïcödé, 数学 ∑∫√ and a URL https://example.org/a?b=c#d", False),
    ("story300", STORY, True),
]

LONG_NAME = "long"
LONG_TEXT = LONG
