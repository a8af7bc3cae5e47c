/* The Gemma 3 constants that files do not carry (llama.cpp hard-codes them; the JAX `gemma` library
 * has them in its configs). One table, so no literal is scattered through the code. */
#ifndef GM_MODEL_GEMMA3_CONSTANTS_H
#define GM_MODEL_GEMMA3_CONSTANTS_H

#define GEMMA3_GLOBAL_EVERY 6          /* layer i is global iff i % 6 == 5 */
#define GEMMA3_ROPE_BASE_LOCAL 10000.0f
#define GEMMA3_ROPE_BASE_GLOBAL 1000000.0f
#define GEMMA3_RMS_EPS 1e-6f
#define GEMMA3_VOCAB 262144
#define GEMMA3_27B_LAYERS 62           /* the 27B scales queries by 1/sqrt(d_model / n_heads) = 1/sqrt(168) */
#define GEMMA3_BOS 2
#define GEMMA3_EOS 1
#define GEMMA3_PAD 0
#define GEMMA3_UNK 3
#define GEMMA3_START_OF_TURN 105
#define GEMMA3_END_OF_TURN 106
#define GEMMA3_START_OF_IMAGE 255999   /* never sampled */
#define GEMMA3_END_OF_IMAGE 256000     /* never sampled */

#endif
