/* The training math in double: the finite-difference reference of the gradient tests. */
#define _POSIX_C_SOURCE 200809L
#include "train/core.h" /* first: it defines both instantiations and clears REAL / SFX */
#define REAL double
#define SFX(name) name##_f64
#define GM_TR_FLOAT 0
#define R_EXP exp
#define R_LOG log
#define R_SQRT sqrt
#define R_TANH tanh
#define R_COS cos
#define R_SIN sin
#include "train/core_impl.h"
