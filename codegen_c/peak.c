/* Peak fp32 FMA throughput of this CPU, measured, not read off a spec sheet.
 *
 * Why: a tuned kernel's GFLOP/s only means something as a fraction of what the core can
 * do. Each thread keeps NACC independent accumulator vectors and runs acc = acc * a + b
 * on all of them in a long loop. NACC must hide the FMA latency (latency x FMA pipes
 * chains in flight: 4-5 cycles x 2 on current cores) and must fit the register file
 * with a and b beside it: 16 accumulators on a 16-register ISA (AVX2, SSE) spill to the
 * stack and measure ~0.6x the real peak. tvmlite.target.peak passes -DNACC from the
 * Target (12 of 16 registers on AVX2, 24 of 32 on AVX-512 and AArch64); the defaults
 * below follow the same rule. GCC vector extensions, no intrinsics, so the same file
 * works on x86-64 (SSE/AVX/AVX-512) and AArch64 (NEON). Build with -O2 -std=gnu11
 * (gnu11 keeps FMA contraction on) and -DVEC_BYTES=64 on AVX-512 machines; check
 * `objdump -d` shows vfmadd (x86) or fmla (arm) and no stack access in the loop
 * (tests/tvmlite/target/test_peak.py does).
 *
 * Library use:  double peak_gflops(int threads, double seconds);  (tvmlite.peak builds it
 *               with the target's compiler and flags, `tvmlite target --peak` runs it)
 * Program use:  cc -DPEAK_MAIN ... peak.c -o peak && ./peak [threads] [seconds]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifndef VEC_BYTES
#if defined(__AVX512F__)
#define VEC_BYTES 64
#elif defined(__AVX__)
#define VEC_BYTES 32
#else
#define VEC_BYTES 16
#endif
#endif

#ifndef NACC
#if VEC_BYTES == 64 || defined(__aarch64__)
#define NACC 24 /* of 32 vector registers */
#else
#define NACC 12 /* of 16 vector registers */
#endif
#endif
#if NACC < 1 || NACC > 32
#error "NACC must be 1..32 (fewer than the vector registers)"
#endif
#define LANES (VEC_BYTES / 4)
#define INNER 4096 /* FMA rounds between clock reads */

typedef float vf __attribute__((vector_size(VEC_BYTES)));

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One thread's work: FMA rounds until `seconds` have passed; returns its GFLOP/s.
 * The result goes to *sink so the compiler cannot drop the loop. */
static double run_thread(double seconds, volatile float *sink) {
    volatile float va = 0.999999f, vb = 1e-6f; /* runtime values: no constant folding */
    vf a, b, acc[NACC];
    for (int l = 0; l < LANES; ++l) {
        a[l] = va;
        b[l] = vb;
    }
    for (int k = 0; k < NACC; ++k)
        for (int l = 0; l < LANES; ++l) acc[k][l] = (float)(k + l) * 1e-3f;

    long rounds = 0;
    double t0 = now_seconds(), t1 = t0;
    do {
        for (int r = 0; r < INNER; ++r) {
#pragma GCC unroll 32
            for (int k = 0; k < NACC; ++k) acc[k] = acc[k] * a + b; /* converges to 1 */
        }
        rounds += INNER;
        t1 = now_seconds();
    } while (t1 - t0 < seconds);

    float s = 0.0f;
    for (int k = 0; k < NACC; ++k)
        for (int l = 0; l < LANES; ++l) s += acc[k][l];
    *sink = s;
    double flops = (double)rounds * NACC * LANES * 2.0;
    return flops / (t1 - t0) * 1e-9;
}

double peak_gflops(int threads, double seconds) {
    volatile float sink = 0.0f;
    double total = 0.0;
    if (threads < 1) threads = 1;
    if (seconds <= 0.0) seconds = 0.5;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : total)
    total += run_thread(seconds, &sink);
#else
    (void)threads;
    total = run_thread(seconds, &sink);
#endif
    return total;
}

int peak_vec_bytes(void) { return VEC_BYTES; }

int peak_chains(void) { return NACC; }

#ifdef PEAK_MAIN
int main(int argc, char **argv) {
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    if (argc > 1) threads = atoi(argv[1]);
    double seconds = argc > 2 ? atof(argv[2]) : 1.0;
    peak_gflops(threads, 0.2); /* warm up: clocks ramp, threads start */
    printf("%.1f GFLOP/s (%d threads, %d-byte vectors, %d chains)\n",
           peak_gflops(threads, seconds), threads, VEC_BYTES, NACC);
    return 0;
}
#endif
