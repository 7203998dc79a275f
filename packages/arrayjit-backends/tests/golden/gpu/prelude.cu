#include <cstdint>
#include <cuda_fp16.h>

__device__ inline float aj_bf16_to_f32(unsigned short b) { return __uint_as_float(((unsigned int)b) << 16); }
__device__ inline unsigned short aj_f32_to_bf16(float f) {
  unsigned int u = __float_as_uint(f);
  if (f != f) return (unsigned short)((u >> 16) | 0x40);
  return (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
__device__ inline float aj_fp8_to_f32(unsigned char b) {
  int e = (b >> 2) & 31, m = b & 3;
  float v = e == 0 ? ldexpf((float)m, -16)
          : (e == 31 ? (m ? NAN : INFINITY) : ldexpf(1.0f + m * 0.25f, e - 15));
  return (b & 0x80) ? -v : v;
}
__device__ inline unsigned char aj_f32_to_fp8(float f) {
  if (f != f) return 0x7E;
  unsigned char sign = signbit(f) ? 0x80 : 0;
  float m = fabsf(f);
  if (m == 0) return sign;
  int e; frexpf(m, &e); e -= 1; if (e < -14) e = -14;
  float q = ldexpf(1.0f, e - 2);
  float r = rintf(m / q) * q;
  if (r >= 65536.0f) return sign | 0x7C;
  if (r == 0) return sign;
  int e2; frexpf(r, &e2); e2 -= 1;
  if (e2 < -14) return sign | (unsigned char)(r * 65536.0f);
  unsigned int mant = (unsigned int)((r / ldexpf(1.0f, e2) - 1.0f) * 4.0f);
  return sign | (unsigned char)(((e2 + 15) << 2) | mant);
}
__device__ inline float aj_fmaxf(float a, float b) {
  return (a > b || a != a) ? a : ((b > a || b != b) ? b : (signbit(a) ? b : a));
}
__device__ inline float aj_fminf(float a, float b) {
  return (a < b || a != a) ? a : ((b < a || b != b) ? b : (signbit(a) ? a : b));
}
__device__ inline double aj_fmax(double a, double b) {
  return (a > b || a != a) ? a : ((b > a || b != b) ? b : (signbit(a) ? b : a));
}
__device__ inline double aj_fmin(double a, double b) {
  return (a < b || a != a) ? a : ((b < a || b != b) ? b : (signbit(a) ? a : b));
}
__device__ inline float aj_ipowf(float x, float y) {
  float r = powf(x, y);
  return y >= 0 ? rintf(r) : r;
}
__device__ inline float aj_ilog2f(float x) {
  int e;
  return frexpf(x, &e) == (float)0.5 ? (float)(e - 1) : log2f(x);
}
__device__ inline double aj_ipow(double x, double y) {
  double r = pow(x, y);
  return y >= 0 ? rint(r) : r;
}
__device__ inline double aj_ilog2(double x) {
  int e;
  return frexp(x, &e) == (double)0.5 ? (double)(e - 1) : log2(x);
}
__device__ inline uint8_t aj_float_to_uint8_t(float x) { return x != x ? (uint8_t)0 : x <= -1.0f ? (uint8_t)0 : x >= 0x1p8f ? ((uint8_t)255LL) : (uint8_t)x; }
__device__ inline uint16_t aj_float_to_uint16_t(float x) { return x != x ? (uint16_t)0 : x <= -1.0f ? (uint16_t)0 : x >= 0x1p16f ? ((uint16_t)65535LL) : (uint16_t)x; }
__device__ inline int32_t aj_float_to_int32_t(float x) { return x != x ? (int32_t)0 : x <= -0x1p31f ? ((int32_t)-2147483648LL) : x >= 0x1p31f ? ((int32_t)2147483647LL) : (int32_t)x; }
__device__ inline uint32_t aj_float_to_uint32_t(float x) { return x != x ? (uint32_t)0 : x <= -1.0f ? (uint32_t)0 : x >= 0x1p32f ? ((uint32_t)4294967295LL) : (uint32_t)x; }
__device__ inline int64_t aj_float_to_int64_t(float x) { return x != x ? (int64_t)0 : x <= -0x1p63f ? ((int64_t)(-0x7FFFFFFFFFFFFFFFLL - 1)) : x >= 0x1p63f ? ((int64_t)9223372036854775807LL) : (int64_t)x; }
__device__ inline uint64_t aj_float_to_uint64_t(float x) { return x != x ? (uint64_t)0 : x <= -1.0f ? (uint64_t)0 : x >= 0x1p64f ? ((uint64_t)18446744073709551615ULL) : (uint64_t)x; }
__device__ inline uint8_t aj_double_to_uint8_t(double x) { return x != x ? (uint8_t)0 : x <= -1.0 ? (uint8_t)0 : x >= 0x1p8 ? ((uint8_t)255LL) : (uint8_t)x; }
__device__ inline uint16_t aj_double_to_uint16_t(double x) { return x != x ? (uint16_t)0 : x <= -1.0 ? (uint16_t)0 : x >= 0x1p16 ? ((uint16_t)65535LL) : (uint16_t)x; }
__device__ inline int32_t aj_double_to_int32_t(double x) { return x != x ? (int32_t)0 : x <= -0x1p31 ? ((int32_t)-2147483648LL) : x >= 0x1p31 ? ((int32_t)2147483647LL) : (int32_t)x; }
__device__ inline uint32_t aj_double_to_uint32_t(double x) { return x != x ? (uint32_t)0 : x <= -1.0 ? (uint32_t)0 : x >= 0x1p32 ? ((uint32_t)4294967295LL) : (uint32_t)x; }
__device__ inline int64_t aj_double_to_int64_t(double x) { return x != x ? (int64_t)0 : x <= -0x1p63 ? ((int64_t)(-0x7FFFFFFFFFFFFFFFLL - 1)) : x >= 0x1p63 ? ((int64_t)9223372036854775807LL) : (int64_t)x; }
__device__ inline uint64_t aj_double_to_uint64_t(double x) { return x != x ? (uint64_t)0 : x <= -1.0 ? (uint64_t)0 : x >= 0x1p64 ? ((uint64_t)18446744073709551615ULL) : (uint64_t)x; }
