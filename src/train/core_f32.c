/* The training math in float: what the trainer runs. */
#define _POSIX_C_SOURCE 200809L
#include "train/core.h" /* first: it defines both instantiations and clears REAL / SFX */
#define REAL float
#define SFX(name) name##_f32
#define GM_TR_FLOAT 1
#define R_EXP expf
#define R_LOG logf
#define R_SQRT sqrtf
#define R_TANH tanhf
#define R_COS cosf
#define R_SIN sinf
#include "train/core_impl.h"
