/* Block sizes of the packed GEMM (kernels/gemm_blocked.h): a KC x NR panel of B stays in L1 across
 * the row panels, the MC x KC block of A in L2. MC is a multiple of every MR (12, 6), NC of every NR. */
#ifndef GM_KERNELS_GEMM_BLOCKS_H
#define GM_KERNELS_GEMM_BLOCKS_H

#define GM_GEMM_MC 192
#define GM_GEMM_KC 256
#define GM_GEMM_NC 3072

#endif
