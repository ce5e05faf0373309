/* Read bandwidth of each level of this CPU's memory hierarchy, measured, not assumed.
 *
 * Why: a kernel's roofline needs the bytes per second each level (L1, L2, L3, memory)
 * delivers, and a spec sheet does not say what a shared VM gets. Each thread owns a
 * buffer of `bytes` (touched first by that thread, so its pages are local), sums it with
 * NACC independent vector accumulators (enough loads in flight to saturate the level),
 * and sweeps it again and again until `seconds` have passed. A buffer that fits in a
 * cache level measures that level; one several times the last cache measures memory.
 * GCC vector extensions only, so the same file builds for x86-64 and AArch64.
 *
 * Library use:  double stream_gbps(int threads, long bytes, double seconds);
 *               (tvmlite/target/bandwidth.py builds it with the target's compiler)
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifndef VEC_BYTES
#define VEC_BYTES 16
#endif
#define NACC 12 /* chains: load latency x 2 loads per cycle, with room */
#define LANES (VEC_BYTES / 4)

typedef float vf __attribute__((vector_size(VEC_BYTES)));

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One thread: GB/s read from its own buffer of `bytes`; 0 if it cannot allocate. */
static double run_thread(long bytes, double seconds, volatile float *sink) {
    long n = bytes / (long)sizeof(vf);
    n -= n % NACC;
    if (n < NACC) n = NACC;
    vf *buf = (vf *)aligned_alloc(64, (size_t)n * sizeof(vf));
    if (buf == NULL) return 0.0;
    for (long i = 0; i < n; ++i)
        for (int l = 0; l < LANES; ++l) buf[i][l] = (float)((i + l) & 7) * 0.125f;
    vf acc[NACC];
    memset(acc, 0, sizeof(acc));
    long sweeps = 0;
    double t0 = now_seconds(), t1 = t0;
    do {
        for (long i = 0; i < n; i += NACC) {
#pragma GCC unroll 12
            for (int k = 0; k < NACC; ++k) acc[k] += buf[i + k];
        }
        ++sweeps;
        t1 = now_seconds();
    } while (t1 - t0 < seconds);
    float s = 0.0f;
    for (int k = 0; k < NACC; ++k)
        for (int l = 0; l < LANES; ++l) s += acc[k][l];
    *sink = s;
    free(buf);
    return (double)sweeps * (double)n * (double)sizeof(vf) / (t1 - t0) * 1e-9;
}

double stream_gbps(int threads, long bytes, double seconds) {
    volatile float sink = 0.0f;
    double total = 0.0;
    if (threads < 1) threads = 1;
    if (seconds <= 0.0) seconds = 0.2;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : total)
    total += run_thread(bytes, seconds, &sink);
#else
    (void)threads;
    total = run_thread(bytes, seconds, &sink);
#endif
    return total;
}
