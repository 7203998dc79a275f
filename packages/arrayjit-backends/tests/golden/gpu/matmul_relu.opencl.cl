/* launches:
   aj_matmul_relu_k0: global 1024, local 256
   aj_matmul_relu_k1: global 7680, local None
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
/* routine matmul_relu */
__kernel void aj_matmul_relu_k0(__global unsigned char* p_h_0, const unsigned long o_h_0, __global unsigned char* p_w_1, const unsigned long o_w_1, __global unsigned char* p_x_2, const unsigned long o_x_2, __global unsigned char* p_y_3, const unsigned long o_y_3) {
  __global float* restrict h_0 = (__global float*)(p_h_0 + o_h_0);
  __global float* restrict w_1 = (__global float*)(p_w_1 + o_w_1);
  __global float* restrict x_2 = (__global float*)(p_x_2 + o_x_2);
  __global float* restrict y_3 = (__global float*)(p_y_3 + o_y_3);
  const int aj_lid = (int)get_local_id(0);
  const long aj_grp = (long)get_group_id(0) % 4;
  const long aj_bi = (aj_grp / 2) * 64;
  const long aj_bj = (aj_grp % 2) * 64;
  const int aj_ty = aj_lid / 16, aj_tx = aj_lid % 16;
  __local float aj_ta[16][68] __attribute__((aligned(16)));
  __local float aj_tb[16][64] __attribute__((aligned(16)));
  const long aj_i0 = aj_bi + aj_ty * 4 + 0;
  const long aj_i1 = aj_bi + aj_ty * 4 + 1;
  const long aj_i2 = aj_bi + aj_ty * 4 + 2;
  const long aj_i3 = aj_bi + aj_ty * 4 + 3;
  const long aj_j0 = aj_bj + aj_tx * 4 + 0;
  const long aj_j1 = aj_bj + aj_tx * 4 + 1;
  const long aj_j2 = aj_bj + aj_tx * 4 + 2;
  const long aj_j3 = aj_bj + aj_tx * 4 + 3;
  float4 aj_c0;
  aj_c0.s0 = (aj_i0 < 96 && aj_j0 < 80) ? (((float)0.0)) : 0;
  aj_c0.s1 = (aj_i0 < 96 && aj_j1 < 80) ? (((float)0.0)) : 0;
  aj_c0.s2 = (aj_i0 < 96 && aj_j2 < 80) ? (((float)0.0)) : 0;
  aj_c0.s3 = (aj_i0 < 96 && aj_j3 < 80) ? (((float)0.0)) : 0;
  float4 aj_c1;
  aj_c1.s0 = (aj_i1 < 96 && aj_j0 < 80) ? (((float)0.0)) : 0;
  aj_c1.s1 = (aj_i1 < 96 && aj_j1 < 80) ? (((float)0.0)) : 0;
  aj_c1.s2 = (aj_i1 < 96 && aj_j2 < 80) ? (((float)0.0)) : 0;
  aj_c1.s3 = (aj_i1 < 96 && aj_j3 < 80) ? (((float)0.0)) : 0;
  float4 aj_c2;
  aj_c2.s0 = (aj_i2 < 96 && aj_j0 < 80) ? (((float)0.0)) : 0;
  aj_c2.s1 = (aj_i2 < 96 && aj_j1 < 80) ? (((float)0.0)) : 0;
  aj_c2.s2 = (aj_i2 < 96 && aj_j2 < 80) ? (((float)0.0)) : 0;
  aj_c2.s3 = (aj_i2 < 96 && aj_j3 < 80) ? (((float)0.0)) : 0;
  float4 aj_c3;
  aj_c3.s0 = (aj_i3 < 96 && aj_j0 < 80) ? (((float)0.0)) : 0;
  aj_c3.s1 = (aj_i3 < 96 && aj_j1 < 80) ? (((float)0.0)) : 0;
  aj_c3.s2 = (aj_i3 < 96 && aj_j2 < 80) ? (((float)0.0)) : 0;
  aj_c3.s3 = (aj_i3 < 96 && aj_j3 < 80) ? (((float)0.0)) : 0;
  const int aj_au0 = (aj_lid + 0) / 16, aj_av0 = (aj_lid + 0) % 16;
  float aj_pa0 = 0;
  const int aj_au1 = (aj_lid + 256) / 16, aj_av1 = (aj_lid + 256) % 16;
  float aj_pa1 = 0;
  const int aj_au2 = (aj_lid + 512) / 16, aj_av2 = (aj_lid + 512) % 16;
  float aj_pa2 = 0;
  const int aj_au3 = (aj_lid + 768) / 16, aj_av3 = (aj_lid + 768) % 16;
  float aj_pa3 = 0;
  const int aj_bu0 = (aj_lid + 0) / 64, aj_bv0 = (aj_lid + 0) % 64;
  float aj_pb0 = 0;
  const int aj_bu1 = (aj_lid + 256) / 64, aj_bv1 = (aj_lid + 256) % 64;
  float aj_pb1 = 0;
  const int aj_bu2 = (aj_lid + 512) / 64, aj_bv2 = (aj_lid + 512) % 64;
  float aj_pb2 = 0;
  const int aj_bu3 = (aj_lid + 768) / 64, aj_bv3 = (aj_lid + 768) % 64;
  float aj_pb3 = 0;
  aj_pa0 = (aj_bi + aj_au0 < 96 && 0 + aj_av0 < 72) ? ((float)x_2[(0 + aj_bi + aj_au0) * 72 + 0 + 0 + aj_av0]) : 0;
  aj_pa1 = (aj_bi + aj_au1 < 96 && 0 + aj_av1 < 72) ? ((float)x_2[(0 + aj_bi + aj_au1) * 72 + 0 + 0 + aj_av1]) : 0;
  aj_pa2 = (aj_bi + aj_au2 < 96 && 0 + aj_av2 < 72) ? ((float)x_2[(0 + aj_bi + aj_au2) * 72 + 0 + 0 + aj_av2]) : 0;
  aj_pa3 = (aj_bi + aj_au3 < 96 && 0 + aj_av3 < 72) ? ((float)x_2[(0 + aj_bi + aj_au3) * 72 + 0 + 0 + aj_av3]) : 0;
  aj_pb0 = (aj_bj + aj_bv0 < 80 && 0 + aj_bu0 < 72) ? ((float)w_1[(0 + 0 + aj_bu0) * 80 + 0 + aj_bj + aj_bv0]) : 0;
  aj_pb1 = (aj_bj + aj_bv1 < 80 && 0 + aj_bu1 < 72) ? ((float)w_1[(0 + 0 + aj_bu1) * 80 + 0 + aj_bj + aj_bv1]) : 0;
  aj_pb2 = (aj_bj + aj_bv2 < 80 && 0 + aj_bu2 < 72) ? ((float)w_1[(0 + 0 + aj_bu2) * 80 + 0 + aj_bj + aj_bv2]) : 0;
  aj_pb3 = (aj_bj + aj_bv3 < 80 && 0 + aj_bu3 < 72) ? ((float)w_1[(0 + 0 + aj_bu3) * 80 + 0 + aj_bj + aj_bv3]) : 0;
  aj_ta[aj_av0][aj_au0] = aj_pa0;
  aj_ta[aj_av1][aj_au1] = aj_pa1;
  aj_ta[aj_av2][aj_au2] = aj_pa2;
  aj_ta[aj_av3][aj_au3] = aj_pa3;
  aj_tb[aj_bu0][aj_bv0] = aj_pb0;
  aj_tb[aj_bu1][aj_bv1] = aj_pb1;
  aj_tb[aj_bu2][aj_bv2] = aj_pb2;
  aj_tb[aj_bu3][aj_bv3] = aj_pb3;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int aj_kt = 0; aj_kt < 64; aj_kt += 16) {
    const int aj_more = aj_kt + 16 < 80;
    if (aj_more) {
      aj_pa0 = (aj_bi + aj_au0 < 96 && (aj_kt + 16) + aj_av0 < 72) ? ((float)x_2[(0 + aj_bi + aj_au0) * 72 + 0 + (aj_kt + 16) + aj_av0]) : 0;
      aj_pa1 = (aj_bi + aj_au1 < 96 && (aj_kt + 16) + aj_av1 < 72) ? ((float)x_2[(0 + aj_bi + aj_au1) * 72 + 0 + (aj_kt + 16) + aj_av1]) : 0;
      aj_pa2 = (aj_bi + aj_au2 < 96 && (aj_kt + 16) + aj_av2 < 72) ? ((float)x_2[(0 + aj_bi + aj_au2) * 72 + 0 + (aj_kt + 16) + aj_av2]) : 0;
      aj_pa3 = (aj_bi + aj_au3 < 96 && (aj_kt + 16) + aj_av3 < 72) ? ((float)x_2[(0 + aj_bi + aj_au3) * 72 + 0 + (aj_kt + 16) + aj_av3]) : 0;
      aj_pb0 = (aj_bj + aj_bv0 < 80 && (aj_kt + 16) + aj_bu0 < 72) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu0) * 80 + 0 + aj_bj + aj_bv0]) : 0;
      aj_pb1 = (aj_bj + aj_bv1 < 80 && (aj_kt + 16) + aj_bu1 < 72) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu1) * 80 + 0 + aj_bj + aj_bv1]) : 0;
      aj_pb2 = (aj_bj + aj_bv2 < 80 && (aj_kt + 16) + aj_bu2 < 72) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu2) * 80 + 0 + aj_bj + aj_bv2]) : 0;
      aj_pb3 = (aj_bj + aj_bv3 < 80 && (aj_kt + 16) + aj_bu3 < 72) ? ((float)w_1[(0 + (aj_kt + 16) + aj_bu3) * 80 + 0 + aj_bj + aj_bv3]) : 0;
    }
    for (int aj_s = 0; aj_s < 16; ++aj_s) {
      const float4 aj_vec_a0 = vload4(0, &aj_ta[aj_s][aj_ty * 4 + 0]);
      const float aj_a0 = aj_vec_a0.x;
      const float aj_a1 = aj_vec_a0.y;
      const float aj_a2 = aj_vec_a0.z;
      const float aj_a3 = aj_vec_a0.w;
      const float4 aj_vec_b0 = vload4(0, &aj_tb[aj_s][aj_tx * 4 + 0]);
      const float aj_b0 = aj_vec_b0.x;
      const float aj_b1 = aj_vec_b0.y;
      const float aj_b2 = aj_vec_b0.z;
      const float aj_b3 = aj_vec_b0.w;
      aj_c0 = fma(((float4)(aj_a0)), ((float4)(aj_b0, aj_b1, aj_b2, aj_b3)), aj_c0);
      aj_c1 = fma(((float4)(aj_a1)), ((float4)(aj_b0, aj_b1, aj_b2, aj_b3)), aj_c1);
      aj_c2 = fma(((float4)(aj_a2)), ((float4)(aj_b0, aj_b1, aj_b2, aj_b3)), aj_c2);
      aj_c3 = fma(((float4)(aj_a3)), ((float4)(aj_b0, aj_b1, aj_b2, aj_b3)), aj_c3);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (aj_more) {
      aj_ta[aj_av0][aj_au0] = aj_pa0;
      aj_ta[aj_av1][aj_au1] = aj_pa1;
      aj_ta[aj_av2][aj_au2] = aj_pa2;
      aj_ta[aj_av3][aj_au3] = aj_pa3;
      aj_tb[aj_bu0][aj_bv0] = aj_pb0;
      aj_tb[aj_bu1][aj_bv1] = aj_pb1;
      aj_tb[aj_bu2][aj_bv2] = aj_pb2;
      aj_tb[aj_bu3][aj_bv3] = aj_pb3;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int aj_s = 0; aj_s < 8; ++aj_s) {
    const float4 aj_vec_a0 = vload4(0, &aj_ta[aj_s][aj_ty * 4 + 0]);
    const float aj_a0 = aj_vec_a0.x;
    const float aj_a1 = aj_vec_a0.y;
    const float aj_a2 = aj_vec_a0.z;
    const float aj_a3 = aj_vec_a0.w;
    const float4 aj_vec_b0 = vload4(0, &aj_tb[aj_s][aj_tx * 4 + 0]);
    const float aj_b0 = aj_vec_b0.x;
    const float aj_b1 = aj_vec_b0.y;
    const float aj_b2 = aj_vec_b0.z;
    const float aj_b3 = aj_vec_b0.w;
    aj_c0 = fma(((float4)(aj_a0)), ((float4)(aj_b0, aj_b1, aj_b2, aj_b3)), aj_c0);
    aj_c1 = fma(((float4)(aj_a1)), ((float4)(aj_b0, aj_b1, aj_b2, aj_b3)), aj_c1);
    aj_c2 = fma(((float4)(aj_a2)), ((float4)(aj_b0, aj_b1, aj_b2, aj_b3)), aj_c2);
    aj_c3 = fma(((float4)(aj_a3)), ((float4)(aj_b0, aj_b1, aj_b2, aj_b3)), aj_c3);
  }
  if (aj_i0 < 96 && aj_j0 < 80) h_0[(0 + aj_i0) * 80 + 0 + aj_j0] = aj_c0.s0;
  if (aj_i0 < 96 && aj_j1 < 80) h_0[(0 + aj_i0) * 80 + 0 + aj_j1] = aj_c0.s1;
  if (aj_i0 < 96 && aj_j2 < 80) h_0[(0 + aj_i0) * 80 + 0 + aj_j2] = aj_c0.s2;
  if (aj_i0 < 96 && aj_j3 < 80) h_0[(0 + aj_i0) * 80 + 0 + aj_j3] = aj_c0.s3;
  if (aj_i1 < 96 && aj_j0 < 80) h_0[(0 + aj_i1) * 80 + 0 + aj_j0] = aj_c1.s0;
  if (aj_i1 < 96 && aj_j1 < 80) h_0[(0 + aj_i1) * 80 + 0 + aj_j1] = aj_c1.s1;
  if (aj_i1 < 96 && aj_j2 < 80) h_0[(0 + aj_i1) * 80 + 0 + aj_j2] = aj_c1.s2;
  if (aj_i1 < 96 && aj_j3 < 80) h_0[(0 + aj_i1) * 80 + 0 + aj_j3] = aj_c1.s3;
  if (aj_i2 < 96 && aj_j0 < 80) h_0[(0 + aj_i2) * 80 + 0 + aj_j0] = aj_c2.s0;
  if (aj_i2 < 96 && aj_j1 < 80) h_0[(0 + aj_i2) * 80 + 0 + aj_j1] = aj_c2.s1;
  if (aj_i2 < 96 && aj_j2 < 80) h_0[(0 + aj_i2) * 80 + 0 + aj_j2] = aj_c2.s2;
  if (aj_i2 < 96 && aj_j3 < 80) h_0[(0 + aj_i2) * 80 + 0 + aj_j3] = aj_c2.s3;
  if (aj_i3 < 96 && aj_j0 < 80) h_0[(0 + aj_i3) * 80 + 0 + aj_j0] = aj_c3.s0;
  if (aj_i3 < 96 && aj_j1 < 80) h_0[(0 + aj_i3) * 80 + 0 + aj_j1] = aj_c3.s1;
  if (aj_i3 < 96 && aj_j2 < 80) h_0[(0 + aj_i3) * 80 + 0 + aj_j2] = aj_c3.s2;
  if (aj_i3 < 96 && aj_j3 < 80) h_0[(0 + aj_i3) * 80 + 0 + aj_j3] = aj_c3.s3;
}
__kernel void aj_matmul_relu_k1(__global unsigned char* p_h_0, const unsigned long o_h_0, __global unsigned char* p_w_1, const unsigned long o_w_1, __global unsigned char* p_x_2, const unsigned long o_x_2, __global unsigned char* p_y_3, const unsigned long o_y_3) {
  __global float* restrict h_0 = (__global float*)(p_h_0 + o_h_0);
  __global float* restrict w_1 = (__global float*)(p_w_1 + o_w_1);
  __global float* restrict x_2 = (__global float*)(p_x_2 + o_x_2);
  __global float* restrict y_3 = (__global float*)(p_y_3 + o_y_3);
  const long aj_gid = (long)get_global_id(0);
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long i1 = 0 + (long)(aj_r % 80u); aj_r /= 80u;
  const long i0 = 0 + (long)aj_r;
  {
    const float t1 = ((float)h_0[(i0) * 80 + i1]);
    y_3[(i0) * 80 + i1] = ((float)(!(t1 <= 0) ? t1 : 0));
  }
}
