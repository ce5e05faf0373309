/* tvmlite's measuring harness: run one compiled kernel, with nothing of Python on the device.
 *
 * Compiled for the target (with its compiler or cross compiler and flags) together with a
 * generated prelude that fixes the kernel's C signature (TVMLITE_NARGS, the function pointer
 * types and the TVMLITE_CALL / TVMLITE_TIME macros; TVMLITE_NPACKS and one pointer type per
 * pack function, see codegen_c/harness.py), so the call through dlsym's pointer has exactly
 * the callee's type. It dlopens the kernel library, fills the inputs from a seeded generator
 * or from raw files, prefills the outputs with NaN (integer outputs with -123456) so an
 * element the kernel never writes shows, runs each pack function once (a pre-packed constant
 * input: <kernel>_pack_<input> fills a buffer, prefilled the same way, from the original
 * input, and the kernel takes that buffer in the input's place), calls the kernel once (the
 * check run), writes the outputs as raw files, then times the kernel alone with its own
 * <name>_time (packing ran once before and is not in any timing) and prints one JSON line:
 *
 *   {"first_call": s, "packed": ["<pack fn>", ...], "number": n, "costs": [s, ...]}
 *
 * Usage:
 *   harness --lib LIB.so --kernel NAME --arg DTYPE:in|out:COUNT ... [--seed S]
 *           [--inputs DIR] [--outputs DIR] [--number N] [--repeat R] [--min-repeat-ms MS]
 *           [--threads T] [--slow-seconds S] [--pack FN:ARG:DTYPE:COUNT ...] [--size N ...]
 * One --arg per kernel argument, in call order (DTYPE: f32 f64 i32 i64 i8 u8 i16 f16 bf16,
 * the last two raw 16-bit floats, generated rounded to nearest even); a pre-packed
 * input's --arg describes the original input (what is filled and read from DIR). One --pack
 * per pack function, in the prelude's order: FN its name, ARG the index of the argument it
 * replaces, DTYPE and COUNT the packed buffer's. Input i is read from DIR/arg<i>.bin,
 * output i written to DIR/arg<i>.bin (native byte order, C order). --repeat 0 only checks.
 * A first call longer than --slow-seconds is the only sample.
 * Exit codes: 0 ok, 2 bad usage, 3 the kernel or a pack function failed (returned non-zero:
 * could not allocate), 4 file error.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if !defined(TVMLITE_NARGS) || !defined(TVMLITE_NPACKS)
#error "compile the harness with the prelude from codegen_c/harness.py (it defines TVMLITE_NARGS)"
#endif

#define MAX_NUMBER (1 << 24)
#define MAX_REPEAT 1000
#define MIN_COST 1e-9

typedef struct {
  int dtype;      /* an index of DTYPES */
  int is_output;
  long long count;
  void* data;
} harness_arg;

typedef struct {
  char fn[256];   /* the pack function's name in the library */
  int arg;        /* the kernel argument its packed buffer replaces */
  harness_arg packed;
} harness_pack;

#define NDTYPES 9
static const size_t ITEMSIZE[NDTYPES] = {4, 8, 4, 8, 1, 1, 2, 2, 2};
static const char* DTYPES[NDTYPES] = {"f32", "f64", "i32", "i64", "i8", "u8", "i16", "f16",
                                      "bf16"};

/* float32 -> float16 / bfloat16 bits, rounded to nearest even (as codegen_c/lowp.py) */
static uint16_t to_f16(float x) {
  union { float f; uint32_t u; } v, d;
  v.f = x;
  uint32_t s = v.u & 0x80000000u, o;
  v.u ^= s;
  if (v.u >= 0x47800000u) o = v.u > 0x7F800000u ? 0x7E00u : 0x7C00u;
  else if (v.u < 0x38800000u) { d.u = v.u; d.f += 0.5f; o = d.u - 0x3F000000u; }
  else o = (v.u + 0xC8000FFFu + ((v.u >> 13) & 1u)) >> 13;
  return (uint16_t)(o | (s >> 16));
}

static uint16_t to_bf16(float x) {
  union { float f; uint32_t u; } v;
  v.f = x;
  if (x != x) return (uint16_t)((v.u >> 16) | 0x40u);
  return (uint16_t)((v.u + 0x7FFFu + ((v.u >> 16) & 1u)) >> 16);
}

static int usage(const char* why) {
  fprintf(stderr, "harness: %s\nusage: harness --lib LIB --kernel NAME --arg DTYPE:in|out:COUNT"
          " ... [--seed S] [--inputs DIR] [--outputs DIR] [--number N] [--repeat R]"
          " [--min-repeat-ms MS] [--threads T] [--slow-seconds S]"
          " [--pack FN:ARG:DTYPE:COUNT ...] [--size N ...]\n", why);
  return 2;
}

/* splitmix64: a small, fully specified generator, the same numbers on every machine */
static uint64_t next_u64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

static void fill_random(harness_arg* a, uint64_t* state) {
  for (long long i = 0; i < a->count; ++i) {
    uint64_t x = next_u64(state);
    double u = (double)(x >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
    switch (a->dtype) {
      case 0: ((float*)a->data)[i] = (float)(2.0 * u - 1.0); break;
      case 1: ((double*)a->data)[i] = 2.0 * u - 1.0; break;
      case 2: ((int32_t*)a->data)[i] = (int32_t)(x >> 60) - 8; break;
      case 3: ((int64_t*)a->data)[i] = (int64_t)(x >> 60) - 8; break;
      case 4: ((int8_t*)a->data)[i] = (int8_t)((int)(x >> 60) - 8); break;
      case 5: ((uint8_t*)a->data)[i] = (uint8_t)(x >> 60); break;
      case 6: ((int16_t*)a->data)[i] = (int16_t)((int)(x >> 60) - 8); break;
      case 7: ((uint16_t*)a->data)[i] = to_f16((float)(2.0 * u - 1.0)); break;
      default: ((uint16_t*)a->data)[i] = to_bf16((float)(2.0 * u - 1.0)); break;
    }
  }
}

static void fill_blank(harness_arg* a) {
  for (long long i = 0; i < a->count; ++i) {
    switch (a->dtype) {
      case 0: ((float*)a->data)[i] = NAN; break;
      case 1: ((double*)a->data)[i] = NAN; break;
      case 2: ((int32_t*)a->data)[i] = -123456; break;
      case 3: ((int64_t*)a->data)[i] = -123456; break;
      case 4: ((int8_t*)a->data)[i] = (int8_t)-64; break;      /* -123456 wrapped */
      case 5: ((uint8_t*)a->data)[i] = (uint8_t)192; break;
      case 6: ((int16_t*)a->data)[i] = (int16_t)7616; break;
      case 7: ((uint16_t*)a->data)[i] = 0x7E00u; break;         /* NaN */
      default: ((uint16_t*)a->data)[i] = 0x7FC0u; break;
    }
  }
}

static int dtype_index(const char* name) {
  for (int k = 0; k < NDTYPES; ++k)
    if (!strcmp(name, DTYPES[k])) return k;
  return -1;
}

static void* alloc_aligned(const harness_arg* a) {
  size_t bytes = ((size_t)a->count * ITEMSIZE[a->dtype] + 63) / 64 * 64;
  return aligned_alloc(64, bytes);
}

static int file_io(const char* dir, int index, harness_arg* a, int writing) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s/arg%d.bin", dir, index) >= (int)sizeof path) return -1;
  FILE* f = fopen(path, writing ? "wb" : "rb");
  if (f == NULL) {
    fprintf(stderr, "harness: cannot open %s\n", path);
    return -1;
  }
  size_t n = (size_t)a->count;
  size_t done = writing ? fwrite(a->data, ITEMSIZE[a->dtype], n, f)
                        : fread(a->data, ITEMSIZE[a->dtype], n, f);
  int bad = fclose(f) != 0 || done != n;
  if (bad) fprintf(stderr, "harness: %s: expected %zu elements of %s\n", path, n,
                   DTYPES[a->dtype]);
  return bad ? -1 : 0;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  const char *lib = NULL, *kernel = NULL, *inputs = NULL, *outputs = NULL;
  harness_arg args[TVMLITE_NARGS];
  harness_pack packs[TVMLITE_NPACKS + 1];   /* + 1: no zero-length array */
  int nargs = 0, npacks = 0, nsizes = 0, threads = 0;
  long long number = 1, repeat = 1;
  double min_repeat_ms = 0.0, slow_seconds = INFINITY;
  uint64_t seed = 0;
  for (int i = 1; i < argc; ++i) {
    const char* opt = argv[i];
    if (i + 1 >= argc) return usage("an option lacks its value");
    const char* val = argv[++i];
    if (!strcmp(opt, "--lib")) lib = val;
    else if (!strcmp(opt, "--kernel")) kernel = val;
    else if (!strcmp(opt, "--inputs")) inputs = val;
    else if (!strcmp(opt, "--outputs")) outputs = val;
    else if (!strcmp(opt, "--seed")) seed = strtoull(val, NULL, 10);
    else if (!strcmp(opt, "--number")) number = atoll(val);
    else if (!strcmp(opt, "--repeat")) repeat = atoll(val);
    else if (!strcmp(opt, "--threads")) threads = atoi(val);
    else if (!strcmp(opt, "--min-repeat-ms")) min_repeat_ms = atof(val);
    else if (!strcmp(opt, "--slow-seconds")) slow_seconds = atof(val);
    else if (!strcmp(opt, "--size")) {   /* a dynamic kernel's leading sizes, in order */
      if (nsizes >= TVMLITE_NSIZES) return usage("more --size than the kernel has sizes");
      char* end = NULL;
      long long v = strtoll(val, &end, 10);
      if (end == val || *end != '\0' || v < 0) return usage("--size is a count, e.g. 8");
      tvmlite_sizes[nsizes++] = (int64_t)v;
    }
    else if (!strcmp(opt, "--arg")) {
      char dt[8], role[8];
      long long count = 0;
      if (nargs >= TVMLITE_NARGS) return usage("more --arg than the kernel has arguments");
      if (sscanf(val, "%7[a-z0-9]:%7[a-z]:%lld", dt, role, &count) != 3 || count < 1)
        return usage("--arg is DTYPE:in|out:COUNT, e.g. f32:in:4096");
      int d = dtype_index(dt);
      if (d < 0 || (strcmp(role, "in") && strcmp(role, "out")))
        return usage("--arg DTYPE is one of f32 f64 i32 i64 i8 u8 i16 f16 bf16, ROLE in or out");
      args[nargs].dtype = d;
      args[nargs].is_output = !strcmp(role, "out");
      args[nargs].count = count;
      args[nargs].data = NULL;
      ++nargs;
    } else if (!strcmp(opt, "--pack")) {
      char dt[8];
      int arg = -1;
      long long count = 0;
      if (npacks >= TVMLITE_NPACKS)
        return usage("more --pack than the prelude has pack functions");
      harness_pack* pk = &packs[npacks];
      if (sscanf(val, "%255[A-Za-z0-9_]:%d:%7[a-z0-9]:%lld", pk->fn, &arg, dt, &count) != 4
          || count < 1)
        return usage("--pack is FN:ARG:DTYPE:COUNT, e.g. k_pack_B:1:f32:4096");
      int d = dtype_index(dt);
      if (d < 0 || arg != tvmlite_pack_arg(npacks) || d != tvmlite_pack_dtype(npacks))
        return usage("--pack ARG and DTYPE differ from the prelude's pack function");
      pk->arg = arg;
      pk->packed.dtype = d;
      pk->packed.is_output = 0;
      pk->packed.count = count;
      pk->packed.data = NULL;
      ++npacks;
    } else return usage("unknown option");
  }
  if (lib == NULL || kernel == NULL) return usage("--lib and --kernel are required");
  if (nargs != TVMLITE_NARGS) return usage("give one --arg per kernel argument");
  if (npacks != TVMLITE_NPACKS) return usage("give one --pack per pack function");
  if (nsizes != TVMLITE_NSIZES) return usage("give one --size per size the kernel takes");
  for (int j = 0; j < npacks; ++j)
    if (packs[j].arg >= nargs || args[packs[j].arg].is_output)
      return usage("--pack ARG must be the index of an input --arg");
  if (number < 1 || number > MAX_NUMBER || repeat < 0 || repeat > MAX_REPEAT)
    return usage("--number is in [1, 2^24], --repeat in [0, 1000]");

  void* handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    fprintf(stderr, "harness: cannot load %s: %s\n", lib, dlerror());
    return 4;
  }
  char name[512];
  tvmlite_kernel_fn run = (tvmlite_kernel_fn)dlsym(handle, kernel);
  snprintf(name, sizeof name, "%s_time", kernel);
  tvmlite_time_fn timer = (tvmlite_time_fn)dlsym(handle, name);
  snprintf(name, sizeof name, "%s_set_num_threads", kernel);
  void (*set_threads)(int32_t) = (void (*)(int32_t))dlsym(handle, name);
  if (run == NULL || timer == NULL || set_threads == NULL) {
    fprintf(stderr, "harness: %s lacks %s, %s_time or %s_set_num_threads\n", lib, kernel,
            kernel, kernel);
    return 4;
  }
  if (threads > 0) set_threads(threads);

  uint64_t state = seed;
  void* p[TVMLITE_NARGS];
  for (int i = 0; i < nargs; ++i) {
    args[i].data = alloc_aligned(&args[i]);
    if (args[i].data == NULL) {
      fprintf(stderr, "harness: out of memory for argument %d\n", i);
      return 3;
    }
    if (args[i].is_output) fill_blank(&args[i]);
    else if (inputs != NULL) { if (file_io(inputs, i, &args[i], 0)) return 4; }
    else fill_random(&args[i], &state);
    p[i] = args[i].data;
  }
  /* pre-packed inputs: pack once, before the check run and the timing */
  for (int j = 0; j < npacks; ++j) {
    void* fn = dlsym(handle, packs[j].fn);
    if (fn == NULL) {
      fprintf(stderr, "harness: %s lacks the pack function %s\n", lib, packs[j].fn);
      return 4;
    }
    packs[j].packed.data = alloc_aligned(&packs[j].packed);
    if (packs[j].packed.data == NULL) {
      fprintf(stderr, "harness: out of memory for the buffer of %s\n", packs[j].fn);
      return 3;
    }
    fill_blank(&packs[j].packed);   /* an element the pack never writes shows */
    int32_t status = tvmlite_pack_call(j, fn, args[packs[j].arg].data, packs[j].packed.data);
    if (status != 0) {
      fprintf(stderr, "harness: the pack function %s returned %d (it could not allocate "
              "its buffers)\n", packs[j].fn, (int)status);
      return 3;
    }
    p[packs[j].arg] = packs[j].packed.data;
  }

  double t0 = now();
  if (TVMLITE_CALL(run, p) != 0) {
    fprintf(stderr, "harness: the kernel could not allocate its buffers\n");
    return 3;
  }
  double first_call = now() - t0;
  if (outputs != NULL)
    for (int i = 0; i < nargs; ++i)
      if (args[i].is_output && file_io(outputs, i, &args[i], 1)) return 4;

  printf("{\"first_call\": %.9g, \"packed\": [", first_call);
  for (int j = 0; j < npacks; ++j) printf("%s\"%s\"", j ? ", " : "", packs[j].fn);
  printf("], ");
  if (first_call > slow_seconds && repeat > 0) {   /* far too slow to matter: one sample */
    printf("\"number\": 1, \"costs\": [%.9g]}\n", first_call > MIN_COST ? first_call : MIN_COST);
    return 0;
  }
  if (min_repeat_ms > 0 && repeat > 0) {
    while (number < MAX_NUMBER) {
      double t = TVMLITE_TIME(timer, p, (int32_t)number);
      if (t < 0) return 3;
      if (t * (double)number * 1e3 >= min_repeat_ms) break;
      long long wanted = t > 0 ? (long long)(min_repeat_ms / (t * 1e3)) + 1 : 2 * number;
      number = wanted > 2 * number ? wanted : 2 * number;
      if (number > MAX_NUMBER) number = MAX_NUMBER;
    }
  }
  printf("\"number\": %lld, \"costs\": [", number);
  for (long long r = 0; r < repeat; ++r) {
    double t = TVMLITE_TIME(timer, p, (int32_t)number);
    if (t < 0) return 3;
    printf("%s%.9g", r ? ", " : "", t > MIN_COST ? t : MIN_COST);
  }
  printf("]}\n");
  return 0;
}
