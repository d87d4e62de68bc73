/* The instruction sets a build assumes, as one string (" avx2 fma avx512f ..."): every
 * compiled library of this folder exports it as `shapeflow_<tag>_isa` (kernels.c:
 * `shapeflow_isa`), and its loader (native.py, kernels.py) refuses a library built for a CPU
 * with more of them than the one it runs on. The names are /proc/cpuinfo's. */
#ifndef SHAPEFLOW_ISA_H
#define SHAPEFLOW_ISA_H

#ifdef __SSE4_1__
#define SF_ISA_SSE4_1 " sse4_1"
#else
#define SF_ISA_SSE4_1 ""
#endif
#ifdef __AVX__
#define SF_ISA_AVX " avx"
#else
#define SF_ISA_AVX ""
#endif
#ifdef __AVX2__
#define SF_ISA_AVX2 " avx2"
#else
#define SF_ISA_AVX2 ""
#endif
#ifdef __FMA__
#define SF_ISA_FMA " fma"
#else
#define SF_ISA_FMA ""
#endif
#ifdef __F16C__
#define SF_ISA_F16C " f16c"
#else
#define SF_ISA_F16C ""
#endif
#ifdef __BMI2__
#define SF_ISA_BMI2 " bmi2"
#else
#define SF_ISA_BMI2 ""
#endif
#ifdef __AVX512F__
#define SF_ISA_AVX512F " avx512f"
#else
#define SF_ISA_AVX512F ""
#endif
#ifdef __AVX512BW__
#define SF_ISA_AVX512BW " avx512bw"
#else
#define SF_ISA_AVX512BW ""
#endif
#ifdef __AVX512DQ__
#define SF_ISA_AVX512DQ " avx512dq"
#else
#define SF_ISA_AVX512DQ ""
#endif
#ifdef __AVX512VL__
#define SF_ISA_AVX512VL " avx512vl"
#else
#define SF_ISA_AVX512VL ""
#endif

#define SHAPEFLOW_ISA                                                                     \
    "" SF_ISA_SSE4_1 SF_ISA_AVX SF_ISA_AVX2 SF_ISA_FMA SF_ISA_F16C SF_ISA_BMI2 SF_ISA_AVX512F \
        SF_ISA_AVX512BW SF_ISA_AVX512DQ SF_ISA_AVX512VL

#endif
