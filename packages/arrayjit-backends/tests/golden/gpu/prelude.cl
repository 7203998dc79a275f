#pragma OPENCL FP_CONTRACT OFF
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef uchar uint8_t; typedef ushort uint16_t; typedef int int32_t;
typedef uint uint32_t; typedef long int64_t; typedef ulong uint64_t;
#define expf(...) exp(__VA_ARGS__)
#define logf(...) log(__VA_ARGS__)
#define exp2f(...) exp2(__VA_ARGS__)
#define log2f(...) log2(__VA_ARGS__)
#define sinf(...) sin(__VA_ARGS__)
#define cosf(...) cos(__VA_ARGS__)
#define sqrtf(...) sqrt(__VA_ARGS__)
#define truncf(...) trunc(__VA_ARGS__)
#define powf(...) pow(__VA_ARGS__)
#define fmodf(...) fmod(__VA_ARGS__)
#define fmaf(...) fma(__VA_ARGS__)
#define fabsf(...) fabs(__VA_ARGS__)
#define frexpf(...) frexp(__VA_ARGS__)
inline __attribute__((always_inline)) float aj_rintf(float x) {
  const float a = fabs(x);
  return a < 0x1p23f ? copysign((a + 0x1p23f) - 0x1p23f, x) : x;
}
#define rintf(...) aj_rintf(__VA_ARGS__)
inline __attribute__((always_inline)) double aj_rint(double x) {
  const double a = fabs(x);
  return a < 0x1p52 ? copysign((a + 0x1p52) - 0x1p52, x) : x;
}
#undef rint
#define rint(...) aj_rint(__VA_ARGS__)
inline __attribute__((always_inline)) float aj_cl_tanhf(float x) { return fabs(x) > 9.1f ? copysign(1.0f, x) : tanh(x); }
#define tanhf(...) aj_cl_tanhf(__VA_ARGS__)

inline __attribute__((always_inline)) float aj_bf16_to_f32(unsigned short b) { return as_float(((unsigned int)b) << 16); }
inline __attribute__((always_inline)) unsigned short aj_f32_to_bf16(float f) {
  unsigned int u = as_uint(f);
  if (f != f) return (unsigned short)((u >> 16) | 0x40);
  return (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
inline __attribute__((always_inline)) float aj_fp8_to_f32(unsigned char b) {
  int e = (b >> 2) & 31, m = b & 3;
  float v = e == 0 ? ldexp((float)m, -16)
          : (e == 31 ? (m ? NAN : INFINITY) : ldexp(1.0f + m * 0.25f, e - 15));
  return (b & 0x80) ? -v : v;
}
inline __attribute__((always_inline)) unsigned char aj_f32_to_fp8(float f) {
  if (f != f) return 0x7E;
  unsigned char sign = signbit(f) ? 0x80 : 0;
  float m = fabs(f);
  if (m == 0) return sign;
  int e; frexp(m, &e); e -= 1; if (e < -14) e = -14;
  float q = ldexp(1.0f, e - 2);
  float r = rintf(m / q) * q;
  if (r >= 65536.0f) return sign | 0x7C;
  if (r == 0) return sign;
  int e2; frexp(r, &e2); e2 -= 1;
  if (e2 < -14) return sign | (unsigned char)(r * 65536.0f);
  unsigned int mant = (unsigned int)((r / ldexp(1.0f, e2) - 1.0f) * 4.0f);
  return sign | (unsigned char)(((e2 + 15) << 2) | mant);
}

inline __attribute__((always_inline)) float aj_fmaxf(float a, float b) {
  return (a > b || a != a) ? a : ((b > a || b != b) ? b : (signbit(a) ? b : a));
}
inline __attribute__((always_inline)) float aj_fminf(float a, float b) {
  return (a < b || a != a) ? a : ((b < a || b != b) ? b : (signbit(a) ? a : b));
}
inline __attribute__((always_inline)) double aj_fmax(double a, double b) {
  return (a > b || a != a) ? a : ((b > a || b != b) ? b : (signbit(a) ? b : a));
}
inline __attribute__((always_inline)) double aj_fmin(double a, double b) {
  return (a < b || a != a) ? a : ((b < a || b != b) ? b : (signbit(a) ? a : b));
}
inline __attribute__((always_inline)) float aj_ipowf(float x, float y) {
  float r = powf(x, y);
  return y >= 0 ? rintf(r) : r;
}
inline __attribute__((always_inline)) float aj_ilog2f(float x) {
  int e;
  return frexpf(x, &e) == (float)0.5 ? (float)(e - 1) : log2f(x);
}
inline __attribute__((always_inline)) double aj_ipow(double x, double y) {
  double r = pow(x, y);
  return y >= 0 ? rint(r) : r;
}
inline __attribute__((always_inline)) double aj_ilog2(double x) {
  int e;
  return frexp(x, &e) == (double)0.5 ? (double)(e - 1) : log2(x);
}

inline __attribute__((always_inline)) float aj_f16_to_f32(ushort b) { return vload_half(0, (const half*)&b); }
inline __attribute__((always_inline)) ushort aj_f32_to_f16(float f) { ushort b; vstore_half_rte(f, 0, (half*)&b); return b; }
inline __attribute__((always_inline)) uint8_t aj_float_to_uint8_t(float x) { return x != x ? (uint8_t)0 : x <= -1.0f ? (uint8_t)0 : x >= 0x1p8f ? ((uint8_t)255LL) : (uint8_t)x; }
inline __attribute__((always_inline)) uint16_t aj_float_to_uint16_t(float x) { return x != x ? (uint16_t)0 : x <= -1.0f ? (uint16_t)0 : x >= 0x1p16f ? ((uint16_t)65535LL) : (uint16_t)x; }
inline __attribute__((always_inline)) int32_t aj_float_to_int32_t(float x) { return x != x ? (int32_t)0 : x <= -0x1p31f ? ((int32_t)-2147483648LL) : x >= 0x1p31f ? ((int32_t)2147483647LL) : (int32_t)x; }
inline __attribute__((always_inline)) uint32_t aj_float_to_uint32_t(float x) { return x != x ? (uint32_t)0 : x <= -1.0f ? (uint32_t)0 : x >= 0x1p32f ? ((uint32_t)4294967295LL) : (uint32_t)x; }
inline __attribute__((always_inline)) int64_t aj_float_to_int64_t(float x) { return x != x ? (int64_t)0 : x <= -0x1p63f ? ((int64_t)(-0x7FFFFFFFFFFFFFFFLL - 1)) : x >= 0x1p63f ? ((int64_t)9223372036854775807LL) : (int64_t)x; }
inline __attribute__((always_inline)) uint64_t aj_float_to_uint64_t(float x) { return x != x ? (uint64_t)0 : x <= -1.0f ? (uint64_t)0 : x >= 0x1p64f ? ((uint64_t)18446744073709551615ULL) : (uint64_t)x; }
inline __attribute__((always_inline)) uint8_t aj_double_to_uint8_t(double x) { return x != x ? (uint8_t)0 : x <= -1.0 ? (uint8_t)0 : x >= 0x1p8 ? ((uint8_t)255LL) : (uint8_t)x; }
inline __attribute__((always_inline)) uint16_t aj_double_to_uint16_t(double x) { return x != x ? (uint16_t)0 : x <= -1.0 ? (uint16_t)0 : x >= 0x1p16 ? ((uint16_t)65535LL) : (uint16_t)x; }
inline __attribute__((always_inline)) int32_t aj_double_to_int32_t(double x) { return x != x ? (int32_t)0 : x <= -0x1p31 ? ((int32_t)-2147483648LL) : x >= 0x1p31 ? ((int32_t)2147483647LL) : (int32_t)x; }
inline __attribute__((always_inline)) uint32_t aj_double_to_uint32_t(double x) { return x != x ? (uint32_t)0 : x <= -1.0 ? (uint32_t)0 : x >= 0x1p32 ? ((uint32_t)4294967295LL) : (uint32_t)x; }
inline __attribute__((always_inline)) int64_t aj_double_to_int64_t(double x) { return x != x ? (int64_t)0 : x <= -0x1p63 ? ((int64_t)(-0x7FFFFFFFFFFFFFFFLL - 1)) : x >= 0x1p63 ? ((int64_t)9223372036854775807LL) : (int64_t)x; }
inline __attribute__((always_inline)) uint64_t aj_double_to_uint64_t(double x) { return x != x ? (uint64_t)0 : x <= -1.0 ? (uint64_t)0 : x >= 0x1p64 ? ((uint64_t)18446744073709551615ULL) : (uint64_t)x; }
