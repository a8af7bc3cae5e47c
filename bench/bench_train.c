/* Training speed on a real model: tokens per second of full steps (forward, backward, update).
 * usage: bench_train MODEL [threads] [batch] [seq_len] [lora_rank] [steps] [loss_fraction]   (lora_rank 0: full)
 * Random tokens; the last loss_fraction of each sequence counts for the loss (default 1: all). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gemma.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_train MODEL [threads] [batch] [seq_len] [lora_rank] [steps] [loss_fraction]\n");
        return 2;
    }
    int threads = argc > 2 ? atoi(argv[2]) : 2, B = argc > 3 ? atoi(argv[3]) : 4, S = argc > 4 ? atoi(argv[4]) : 64;
    int rank = argc > 5 ? atoi(argv[5]) : 8, steps = argc > 6 ? atoi(argv[6]) : 3;
    double frac = argc > 7 ? atof(argv[7]) : 1.0;
    gm_train_options o;
    gm_train_options_default(&o);
    o.threads_per_device = threads;
    o.lora_rank = rank;
    o.lr = 1e-4;
    gm_trainer *t;
    if (gm_trainer_create(argv[1], &o, &t) != GM_OK) {
        fprintf(stderr, "%s\n", gm_last_error());
        return 1;
    }
    int V = gm_trainer_config(t)->vocab_size;
    int32_t *tok = malloc((size_t)B * S * sizeof *tok);
    uint8_t *mask = malloc((size_t)B * S);
    gm_train_example *ex = malloc((size_t)B * sizeof *ex);
    unsigned s = 12345;
    for (int b = 0; b < B; b++) {
        for (int i = 0; i < S; i++) tok[b * S + i] = i == 0 ? 2 : (int32_t)((s = s * 1103515245u + 12345u) % (unsigned)(V - 3) + 3);
        for (int i = 0; i < S - 1; i++) mask[b * S + i] = i >= (int)((1.0 - frac) * (S - 1));
        ex[b] = (gm_train_example){tok + b * S, mask + b * S, S};
    }
    double total = 0, cpu_total = 0;
    long tokens = 0;
    for (int i = 0; i < steps; i++) {
        gm_train_stats st;
        struct timespec c0, c1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        if (gm_trainer_step(t, ex, B, &st) != GM_OK) {
            fprintf(stderr, "%s\n", gm_last_error());
            return 1;
        }
        printf("step %d: loss %.4f, %.2f s, %.1f tok/s\n", i + 1, st.loss, st.seconds, st.tokens / st.seconds);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        double cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
        if (i > 0 || steps == 1) total += st.seconds, tokens += st.tokens, cpu_total += cpu;
    }
    gm_train_memory m = gm_trainer_memory(t, 0);
    printf("threads %d, batch %d x %d, LoRA rank %d: %.1f tok/s, %.1f tok per CPU-second (steps after the first); "
           "memory %.0f MiB (params %.0f, grads %.0f, optimizer %.0f, gathered %.0f, activations %.0f)\n",
           threads, B, S, rank, tokens / total, tokens / cpu_total, m.total / 1048576.0, m.params / 1048576.0, m.grads / 1048576.0,
           m.optimizer / 1048576.0, m.gathered / 1048576.0, m.activations / 1048576.0);
    gm_trainer_free(t);
    free(tok), free(mask), free(ex);
    return 0;
}
