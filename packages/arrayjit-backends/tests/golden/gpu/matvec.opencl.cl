/* launches:
   aj_matvec_k0: global 300, local None
   aj_matvec_k1: global 512, local 256
*/
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
#define rintf(...) rint(__VA_ARGS__)
#define frexpf(...) frexp(__VA_ARGS__)
inline float aj_cl_tanhf(float x) { return fabs(x) > 9.1f ? copysign(1.0f, x) : tanh(x); }
#define tanhf(...) aj_cl_tanhf(__VA_ARGS__)

inline float aj_bf16_to_f32(unsigned short b) { return as_float(((unsigned int)b) << 16); }
inline unsigned short aj_f32_to_bf16(float f) {
  unsigned int u = as_uint(f);
  if (f != f) return (unsigned short)((u >> 16) | 0x40);
  return (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
inline float aj_fp8_to_f32(unsigned char b) {
  int e = (b >> 2) & 31, m = b & 3;
  float v = e == 0 ? ldexp((float)m, -16)
          : (e == 31 ? (m ? NAN : INFINITY) : ldexp(1.0f + m * 0.25f, e - 15));
  return (b & 0x80) ? -v : v;
}
inline unsigned char aj_f32_to_fp8(float f) {
  if (f != f) return 0x7E;
  unsigned char sign = signbit(f) ? 0x80 : 0;
  float m = fabs(f);
  if (m == 0) return sign;
  int e; frexp(m, &e); e -= 1; if (e < -14) e = -14;
  float q = ldexp(1.0f, e - 2);
  float r = rint(m / q) * q;
  if (r >= 65536.0f) return sign | 0x7C;
  if (r == 0) return sign;
  int e2; frexp(r, &e2); e2 -= 1;
  if (e2 < -14) return sign | (unsigned char)(r * 65536.0f);
  unsigned int mant = (unsigned int)((r / ldexp(1.0f, e2) - 1.0f) * 4.0f);
  return sign | (unsigned char)(((e2 + 15) << 2) | mant);
}

inline float aj_fmaxf(float a, float b) {
  return (a > b || a != a) ? a : ((b > a || b != b) ? b : (signbit(a) ? b : a));
}
inline float aj_fminf(float a, float b) {
  return (a < b || a != a) ? a : ((b < a || b != b) ? b : (signbit(a) ? a : b));
}
inline double aj_fmax(double a, double b) {
  return (a > b || a != a) ? a : ((b > a || b != b) ? b : (signbit(a) ? b : a));
}
inline double aj_fmin(double a, double b) {
  return (a < b || a != a) ? a : ((b < a || b != b) ? b : (signbit(a) ? a : b));
}
inline float aj_ipowf(float x, float y) {
  float r = powf(x, y);
  return y >= 0 ? rintf(r) : r;
}
inline float aj_ilog2f(float x) {
  int e;
  return frexpf(x, &e) == (float)0.5 ? (float)(e - 1) : log2f(x);
}
inline double aj_ipow(double x, double y) {
  double r = pow(x, y);
  return y >= 0 ? rint(r) : r;
}
inline double aj_ilog2(double x) {
  int e;
  return frexp(x, &e) == (double)0.5 ? (double)(e - 1) : log2(x);
}

inline float aj_f16_to_f32(ushort b) { return vload_half(0, (const half*)&b); }
inline ushort aj_f32_to_f16(float f) { ushort b; vstore_half_rte(f, 0, (half*)&b); return b; }
inline uint8_t aj_float_to_uint8_t(float x) { return x != x ? (uint8_t)0 : x <= -1.0f ? (uint8_t)0 : x >= 0x1p8f ? ((uint8_t)255LL) : (uint8_t)x; }
inline uint16_t aj_float_to_uint16_t(float x) { return x != x ? (uint16_t)0 : x <= -1.0f ? (uint16_t)0 : x >= 0x1p16f ? ((uint16_t)65535LL) : (uint16_t)x; }
inline int32_t aj_float_to_int32_t(float x) { return x != x ? (int32_t)0 : x <= -0x1p31f ? ((int32_t)-2147483648LL) : x >= 0x1p31f ? ((int32_t)2147483647LL) : (int32_t)x; }
inline uint32_t aj_float_to_uint32_t(float x) { return x != x ? (uint32_t)0 : x <= -1.0f ? (uint32_t)0 : x >= 0x1p32f ? ((uint32_t)4294967295LL) : (uint32_t)x; }
inline int64_t aj_float_to_int64_t(float x) { return x != x ? (int64_t)0 : x <= -0x1p63f ? ((int64_t)(-0x7FFFFFFFFFFFFFFFLL - 1)) : x >= 0x1p63f ? ((int64_t)9223372036854775807LL) : (int64_t)x; }
inline uint64_t aj_float_to_uint64_t(float x) { return x != x ? (uint64_t)0 : x <= -1.0f ? (uint64_t)0 : x >= 0x1p64f ? ((uint64_t)18446744073709551615ULL) : (uint64_t)x; }
inline uint8_t aj_double_to_uint8_t(double x) { return x != x ? (uint8_t)0 : x <= -1.0 ? (uint8_t)0 : x >= 0x1p8 ? ((uint8_t)255LL) : (uint8_t)x; }
inline uint16_t aj_double_to_uint16_t(double x) { return x != x ? (uint16_t)0 : x <= -1.0 ? (uint16_t)0 : x >= 0x1p16 ? ((uint16_t)65535LL) : (uint16_t)x; }
inline int32_t aj_double_to_int32_t(double x) { return x != x ? (int32_t)0 : x <= -0x1p31 ? ((int32_t)-2147483648LL) : x >= 0x1p31 ? ((int32_t)2147483647LL) : (int32_t)x; }
inline uint32_t aj_double_to_uint32_t(double x) { return x != x ? (uint32_t)0 : x <= -1.0 ? (uint32_t)0 : x >= 0x1p32 ? ((uint32_t)4294967295LL) : (uint32_t)x; }
inline int64_t aj_double_to_int64_t(double x) { return x != x ? (int64_t)0 : x <= -0x1p63 ? ((int64_t)(-0x7FFFFFFFFFFFFFFFLL - 1)) : x >= 0x1p63 ? ((int64_t)9223372036854775807LL) : (int64_t)x; }
inline uint64_t aj_double_to_uint64_t(double x) { return x != x ? (uint64_t)0 : x <= -1.0 ? (uint64_t)0 : x >= 0x1p64 ? ((uint64_t)18446744073709551615ULL) : (uint64_t)x; }
/* routine matvec */
__kernel void aj_matvec_k0(__global unsigned char* p_v_0, const unsigned long o_v_0, __global unsigned char* p_w_1, const unsigned long o_w_1, __global unsigned char* p_y_2, const unsigned long o_y_2) {
  __global float* restrict v_0 = (__global float*)(p_v_0 + o_v_0);
  __global float* restrict w_1 = (__global float*)(p_w_1 + o_w_1);
  __global float* restrict y_2 = (__global float*)(p_y_2 + o_y_2);
  const long aj_gid = (long)get_global_id(0);
  y_2[aj_gid] = 0;
}
__kernel void aj_matvec_k1(__global unsigned char* p_v_0, const unsigned long o_v_0, __global unsigned char* p_w_1, const unsigned long o_w_1, __global unsigned char* p_y_2, const unsigned long o_y_2) {
  __global float* restrict v_0 = (__global float*)(p_v_0 + o_v_0);
  __global float* restrict w_1 = (__global float*)(p_w_1 + o_w_1);
  __global float* restrict y_2 = (__global float*)(p_y_2 + o_y_2);
  const int aj_lid = (int)get_local_id(0);
  const long aj_grp = (long)get_group_id(0) % 2;
  const long aj_bi = (aj_grp / 2) * 8;
  const long aj_bj = (aj_grp % 2) * 256;
  const int aj_ty = aj_lid / 32, aj_tx = aj_lid % 32;
  __local float aj_ta[16][12] __attribute__((aligned(16)));
  __local float aj_tb[16][256] __attribute__((aligned(16)));
  const long aj_i0 = aj_bi + aj_ty * 1 + 0;
  const long aj_j0 = aj_bj + aj_tx * 8 + 0;
  const long aj_j1 = aj_bj + aj_tx * 8 + 1;
  const long aj_j2 = aj_bj + aj_tx * 8 + 2;
  const long aj_j3 = aj_bj + aj_tx * 8 + 3;
  const long aj_j4 = aj_bj + aj_tx * 8 + 4;
  const long aj_j5 = aj_bj + aj_tx * 8 + 5;
  const long aj_j6 = aj_bj + aj_tx * 8 + 6;
  const long aj_j7 = aj_bj + aj_tx * 8 + 7;
  float8 aj_c0;
  aj_c0.s0 = (aj_i0 < 1 && aj_j0 < 300) ? ((float)y_2[(0) * 300 + 0 + aj_j0]) : 0;
  aj_c0.s1 = (aj_i0 < 1 && aj_j1 < 300) ? ((float)y_2[(0) * 300 + 0 + aj_j1]) : 0;
  aj_c0.s2 = (aj_i0 < 1 && aj_j2 < 300) ? ((float)y_2[(0) * 300 + 0 + aj_j2]) : 0;
  aj_c0.s3 = (aj_i0 < 1 && aj_j3 < 300) ? ((float)y_2[(0) * 300 + 0 + aj_j3]) : 0;
  aj_c0.s4 = (aj_i0 < 1 && aj_j4 < 300) ? ((float)y_2[(0) * 300 + 0 + aj_j4]) : 0;
  aj_c0.s5 = (aj_i0 < 1 && aj_j5 < 300) ? ((float)y_2[(0) * 300 + 0 + aj_j5]) : 0;
  aj_c0.s6 = (aj_i0 < 1 && aj_j6 < 300) ? ((float)y_2[(0) * 300 + 0 + aj_j6]) : 0;
  aj_c0.s7 = (aj_i0 < 1 && aj_j7 < 300) ? ((float)y_2[(0) * 300 + 0 + aj_j7]) : 0;
  const int aj_au0 = (aj_lid + 0) / 16, aj_av0 = (aj_lid + 0) % 16;
  float aj_pa0 = 0;
  const int aj_bu0 = (aj_lid + 0) / 256, aj_bv0 = (aj_lid + 0) % 256;
  float aj_pb0 = 0;
  const int aj_bu1 = (aj_lid + 256) / 256, aj_bv1 = (aj_lid + 256) % 256;
  float aj_pb1 = 0;
  const int aj_bu2 = (aj_lid + 512) / 256, aj_bv2 = (aj_lid + 512) % 256;
  float aj_pb2 = 0;
  const int aj_bu3 = (aj_lid + 768) / 256, aj_bv3 = (aj_lid + 768) % 256;
  float aj_pb3 = 0;
  const int aj_bu4 = (aj_lid + 1024) / 256, aj_bv4 = (aj_lid + 1024) % 256;
  float aj_pb4 = 0;
  const int aj_bu5 = (aj_lid + 1280) / 256, aj_bv5 = (aj_lid + 1280) % 256;
  float aj_pb5 = 0;
  const int aj_bu6 = (aj_lid + 1536) / 256, aj_bv6 = (aj_lid + 1536) % 256;
  float aj_pb6 = 0;
  const int aj_bu7 = (aj_lid + 1792) / 256, aj_bv7 = (aj_lid + 1792) % 256;
  float aj_pb7 = 0;
  const int aj_bu8 = (aj_lid + 2048) / 256, aj_bv8 = (aj_lid + 2048) % 256;
  float aj_pb8 = 0;
  const int aj_bu9 = (aj_lid + 2304) / 256, aj_bv9 = (aj_lid + 2304) % 256;
  float aj_pb9 = 0;
  const int aj_bu10 = (aj_lid + 2560) / 256, aj_bv10 = (aj_lid + 2560) % 256;
  float aj_pb10 = 0;
  const int aj_bu11 = (aj_lid + 2816) / 256, aj_bv11 = (aj_lid + 2816) % 256;
  float aj_pb11 = 0;
  const int aj_bu12 = (aj_lid + 3072) / 256, aj_bv12 = (aj_lid + 3072) % 256;
  float aj_pb12 = 0;
  const int aj_bu13 = (aj_lid + 3328) / 256, aj_bv13 = (aj_lid + 3328) % 256;
  float aj_pb13 = 0;
  const int aj_bu14 = (aj_lid + 3584) / 256, aj_bv14 = (aj_lid + 3584) % 256;
  float aj_pb14 = 0;
  const int aj_bu15 = (aj_lid + 3840) / 256, aj_bv15 = (aj_lid + 3840) % 256;
  float aj_pb15 = 0;
  aj_pa0 = (aj_lid + 0 < 128 && aj_bi + aj_au0 < 1 && 0 + aj_av0 < 200) ? ((float)v_0[(0) * 200 + 0 + 0 + aj_av0]) : 0;
  aj_pb0 = (aj_bj + aj_bv0 < 300 && 0 + aj_bu0 < 200) ? ((float)w_1[(0 + 0 + aj_bu0) * 300 + 0 + aj_bj + aj_bv0]) : 0;
  aj_pb1 = (aj_bj + aj_bv1 < 300 && 0 + aj_bu1 < 200) ? ((float)w_1[(0 + 0 + aj_bu1) * 300 + 0 + aj_bj + aj_bv1]) : 0;
  aj_pb2 = (aj_bj + aj_bv2 < 300 && 0 + aj_bu2 < 200) ? ((float)w_1[(0 + 0 + aj_bu2) * 300 + 0 + aj_bj + aj_bv2]) : 0;
  aj_pb3 = (aj_bj + aj_bv3 < 300 && 0 + aj_bu3 < 200) ? ((float)w_1[(0 + 0 + aj_bu3) * 300 + 0 + aj_bj + aj_bv3]) : 0;
  aj_pb4 = (aj_bj + aj_bv4 < 300 && 0 + aj_bu4 < 200) ? ((float)w_1[(0 + 0 + aj_bu4) * 300 + 0 + aj_bj + aj_bv4]) : 0;
  aj_pb5 = (aj_bj + aj_bv5 < 300 && 0 + aj_bu5 < 200) ? ((float)w_1[(0 + 0 + aj_bu5) * 300 + 0 + aj_bj + aj_bv5]) : 0;
  aj_pb6 = (aj_bj + aj_bv6 < 300 && 0 + aj_bu6 < 200) ? ((float)w_1[(0 + 0 + aj_bu6) * 300 + 0 + aj_bj + aj_bv6]) : 0;
  aj_pb7 = (aj_bj + aj_bv7 < 300 && 0 + aj_bu7 < 200) ? ((float)w_1[(0 + 0 + aj_bu7) * 300 + 0 + aj_bj + aj_bv7]) : 0;
  aj_pb8 = (aj_bj + aj_bv8 < 300 && 0 + aj_bu8 < 200) ? ((float)w_1[(0 + 0 + aj_bu8) * 300 + 0 + aj_bj + aj_bv8]) : 0;
  aj_pb9 = (aj_bj + aj_bv9 < 300 && 0 + aj_bu9 < 200) ? ((float)w_1[(0 + 0 + aj_bu9) * 300 + 0 + aj_bj + aj_bv9]) : 0;
  aj_pb10 = (aj_bj + aj_bv10 < 300 && 0 + aj_bu10 < 200) ? ((float)w_1[(0 + 0 + aj_bu10) * 300 + 0 + aj_bj + aj_bv10]) : 0;
  aj_pb11 = (aj_bj + aj_bv11 < 300 && 0 + aj_bu11 < 200) ? ((float)w_1[(0 + 0 + aj_bu11) * 300 + 0 + aj_bj + aj_bv11]) : 0;
  aj_pb12 = (aj_bj + aj_bv12 < 300 && 0 + aj_bu12 < 200) ? ((float)w_1[(0 + 0 + aj_bu12) * 300 + 0 + aj_bj + aj_bv12]) : 0;
  aj_pb13 = (aj_bj + aj_bv13 < 300 && 0 + aj_bu13 < 200) ? ((float)w_1[(0 + 0 + aj_bu13) * 300 + 0 + aj_bj + aj_bv13]) : 0;
  aj_pb14 = (aj_bj + aj_bv14 < 300 && 0 + aj_bu14 < 200) ? ((float)w_1[(0 + 0 + aj_bu14) * 300 + 0 + aj_bj + aj_bv14]) : 0;
  aj_pb15 = (aj_bj + aj_bv15 < 300 && 0 + aj_bu15 < 200) ? ((float)w_1[(0 + 0 + aj_bu15) * 300 + 0 + aj_bj + aj_bv15]) : 0;
  if (aj_lid + 0 < 128) aj_ta[aj_av0][aj_au0] = aj_pa0;
  aj_tb[aj_bu0][aj_bv0] = aj_pb0;
  aj_tb[aj_bu1][aj_bv1] = aj_pb1;
  aj_tb[aj_bu2][aj_bv2] = aj_pb2;
  aj_tb[aj_bu3][aj_bv3] = aj_pb3;
  aj_tb[aj_bu4][aj_bv4] = aj_pb4;
  aj_tb[aj_bu5][aj_bv5] = aj_pb5;
  aj_tb[aj_bu6][aj_bv6] = aj_pb6;
  aj_tb[aj_bu7][aj_bv7] = aj_pb7;
  aj_tb[aj_bu8][aj_bv8] = aj_pb8;
  aj_tb[aj_bu9][aj_bv9] = aj_pb9;
  aj_tb[aj_bu10][aj_bv10] = aj_pb10;
  aj_tb[aj_bu11][aj_bv11] = aj_pb11;
  aj_tb[aj_bu12][aj_bv12] = aj_pb12;
  aj_tb[aj_bu13][aj_bv13] = aj_pb13;
  aj_tb[aj_bu14][aj_bv14] = aj_pb14;
  aj_tb[aj_bu15][aj_bv15] = aj_pb15;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int aj_kt = 0; aj_kt < 192; aj_kt += 16) {
    const int aj_more = aj_kt + 16 < 208;
    if (aj_more) {
      aj_pa0 = (aj_lid + 0 < 128 && aj_bi + aj_au0 < 1 && (aj_kt + 16) + aj_av0 < 200) ? ((float)v_0[(0) * 200 + 0 + (aj_kt + 16) + aj_av0]) : 0;
      aj_pb0 = (aj_bj + aj_bv0 < 300 && (aj_kt + 16) + aj_bu0 < 200) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu0) * 300 + 0 + aj_bj + aj_bv0]) : 0;
      aj_pb1 = (aj_bj + aj_bv1 < 300 && (aj_kt + 16) + aj_bu1 < 200) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu1) * 300 + 0 + aj_bj + aj_bv1]) : 0;
      aj_pb2 = (aj_bj + aj_bv2 < 300 && (aj_kt + 16) + aj_bu2 < 200) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu2) * 300 + 0 + aj_bj + aj_bv2]) : 0;
      aj_pb3 = (aj_bj + aj_bv3 < 300 && (aj_kt + 16) + aj_bu3 < 200) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu3) * 300 + 0 + aj_bj + aj_bv3]) : 0;
      aj_pb4 = (aj_bj + aj_bv4 < 300 && (aj_kt + 16) + aj_bu4 < 200) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu4) * 300 + 0 + aj_bj + aj_bv4]) : 0;
      aj_pb5 = (aj_bj + aj_bv5 < 300 && (aj_kt + 16) + aj_bu5 < 200) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu5) * 300 + 0 + aj_bj + aj_bv5]) : 0;
      aj_pb6 = (aj_bj + aj_bv6 < 300 && (aj_kt + 16) + aj_bu6 < 200) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu6) * 300 + 0 + aj_bj + aj_bv6]) : 0;
      aj_pb7 = (aj_bj + aj_bv7 < 300 && (aj_kt + 16) + aj_bu7 < 200) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu7) * 300 + 0 + aj_bj + aj_bv7]) : 0;
      aj_pb8 = (aj_bj + aj_bv8 < 300 && (aj_kt + 16) + aj_bu8 < 200) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu8) * 300 + 0 + aj_bj + aj_bv8]) : 0;
      aj_pb9 = (aj_bj + aj_bv9 < 300 && (aj_kt + 16) + aj_bu9 < 200) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu9) * 300 + 0 + aj_bj + aj_bv9]) : 0;
      aj_pb10 = (aj_bj + aj_bv10 < 300 && (aj_kt + 16) + aj_bu10 < 200) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu10) * 300 + 0 + aj_bj + aj_bv10]) : 0;
      aj_pb11 = (aj_bj + aj_bv11 < 300 && (aj_kt + 16) + aj_bu11 < 200) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu11) * 300 + 0 + aj_bj + aj_bv11]) : 0;
      aj_pb12 = (aj_bj + aj_bv12 < 300 && (aj_kt + 16) + aj_bu12 < 200) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu12) * 300 + 0 + aj_bj + aj_bv12]) : 0;
      aj_pb13 = (aj_bj + aj_bv13 < 300 && (aj_kt + 16) + aj_bu13 < 200) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu13) * 300 + 0 + aj_bj + aj_bv13]) : 0;
      aj_pb14 = (aj_bj + aj_bv14 < 300 && (aj_kt + 16) + aj_bu14 < 200) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu14) * 300 + 0 + aj_bj + aj_bv14]) : 0;
      aj_pb15 = (aj_bj + aj_bv15 < 300 && (aj_kt + 16) + aj_bu15 < 200) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu15) * 300 + 0 + aj_bj + aj_bv15]) : 0;
    }
    for (int aj_s = 0; aj_s < 16; ++aj_s) {
      const float aj_a0 = aj_ta[aj_s][aj_ty * 1 + 0];
      const float4 aj_vec_b0 = vload4(0, &aj_tb[aj_s][aj_tx * 8 + 0]);
      const float aj_b0 = aj_vec_b0.x;
      const float aj_b1 = aj_vec_b0.y;
      const float aj_b2 = aj_vec_b0.z;
      const float aj_b3 = aj_vec_b0.w;
      const float4 aj_vec_b1 = vload4(0, &aj_tb[aj_s][aj_tx * 8 + 4]);
      const float aj_b4 = aj_vec_b1.x;
      const float aj_b5 = aj_vec_b1.y;
      const float aj_b6 = aj_vec_b1.z;
      const float aj_b7 = aj_vec_b1.w;
      aj_c0 = fma(((float8)(aj_a0)), ((float8)(aj_b0, aj_b1, aj_b2, aj_b3, aj_b4, aj_b5, aj_b6, aj_b7)), aj_c0);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (aj_more) {
      if (aj_lid + 0 < 128) aj_ta[aj_av0][aj_au0] = aj_pa0;
      aj_tb[aj_bu0][aj_bv0] = aj_pb0;
      aj_tb[aj_bu1][aj_bv1] = aj_pb1;
      aj_tb[aj_bu2][aj_bv2] = aj_pb2;
      aj_tb[aj_bu3][aj_bv3] = aj_pb3;
      aj_tb[aj_bu4][aj_bv4] = aj_pb4;
      aj_tb[aj_bu5][aj_bv5] = aj_pb5;
      aj_tb[aj_bu6][aj_bv6] = aj_pb6;
      aj_tb[aj_bu7][aj_bv7] = aj_pb7;
      aj_tb[aj_bu8][aj_bv8] = aj_pb8;
      aj_tb[aj_bu9][aj_bv9] = aj_pb9;
      aj_tb[aj_bu10][aj_bv10] = aj_pb10;
      aj_tb[aj_bu11][aj_bv11] = aj_pb11;
      aj_tb[aj_bu12][aj_bv12] = aj_pb12;
      aj_tb[aj_bu13][aj_bv13] = aj_pb13;
      aj_tb[aj_bu14][aj_bv14] = aj_pb14;
      aj_tb[aj_bu15][aj_bv15] = aj_pb15;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int aj_s = 0; aj_s < 8; ++aj_s) {
    const float aj_a0 = aj_ta[aj_s][aj_ty * 1 + 0];
    const float4 aj_vec_b0 = vload4(0, &aj_tb[aj_s][aj_tx * 8 + 0]);
    const float aj_b0 = aj_vec_b0.x;
    const float aj_b1 = aj_vec_b0.y;
    const float aj_b2 = aj_vec_b0.z;
    const float aj_b3 = aj_vec_b0.w;
    const float4 aj_vec_b1 = vload4(0, &aj_tb[aj_s][aj_tx * 8 + 4]);
    const float aj_b4 = aj_vec_b1.x;
    const float aj_b5 = aj_vec_b1.y;
    const float aj_b6 = aj_vec_b1.z;
    const float aj_b7 = aj_vec_b1.w;
    aj_c0 = fma(((float8)(aj_a0)), ((float8)(aj_b0, aj_b1, aj_b2, aj_b3, aj_b4, aj_b5, aj_b6, aj_b7)), aj_c0);
  }
  if (aj_i0 < 1 && aj_j0 < 300) y_2[(0) * 300 + 0 + aj_j0] = aj_c0.s0;
  if (aj_i0 < 1 && aj_j1 < 300) y_2[(0) * 300 + 0 + aj_j1] = aj_c0.s1;
  if (aj_i0 < 1 && aj_j2 < 300) y_2[(0) * 300 + 0 + aj_j2] = aj_c0.s2;
  if (aj_i0 < 1 && aj_j3 < 300) y_2[(0) * 300 + 0 + aj_j3] = aj_c0.s3;
  if (aj_i0 < 1 && aj_j4 < 300) y_2[(0) * 300 + 0 + aj_j4] = aj_c0.s4;
  if (aj_i0 < 1 && aj_j5 < 300) y_2[(0) * 300 + 0 + aj_j5] = aj_c0.s5;
  if (aj_i0 < 1 && aj_j6 < 300) y_2[(0) * 300 + 0 + aj_j6] = aj_c0.s6;
  if (aj_i0 < 1 && aj_j7 < 300) y_2[(0) * 300 + 0 + aj_j7] = aj_c0.s7;
}
