/* launches:
   aj_softmax_rows_k0: global 512, local None
   aj_softmax_rows_k1: global 512000, local None
   aj_softmax_rows_k2: global 512000, local None
   aj_softmax_rows_k3: global 512, local None
   aj_softmax_rows_k4: global 512000, local None
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
inline float aj_expf(float x) {
  const int t1 = x != x;
  const int t2 = x > 0x1.64p+6f;
  const float t3 = t2 ? 0x1.64p+6f : x;
  const int t4 = t3 < -0x1.ap+6f;
  const float t5 = t4 ? -0x1.ap+6f : t3;
  const float t6 = t1 ? 0x0p+0f : t5;
  const float t7 = t6 * 0x1.715476p+0f;
  const float t8 = rintf(t7);
  const float t9 = -t8;
  const float t10 = fmaf(t9, 0x1.62e43p-1f, t6);
  const float t11 = t9 * -0x1.05c61p-29f;
  const float t12 = t10 + t11;
  const float t13 = fmaf(t12, 0x1.9df468p-13f, 0x1.6d4cfep-10f);
  const float t14 = fmaf(t13, t12, 0x1.111312p-7f);
  const float t15 = fmaf(t14, t12, 0x1.5554e8p-5f);
  const float t16 = fmaf(t15, t12, 0x1.555554p-3f);
  const float t17 = fmaf(t16, t12, 0x1p-1f);
  const float t18 = t12 * t12;
  const float t19 = fmaf(t18, t17, t11);
  const float t20 = t10 + 0x1p+0f;
  const float t21 = t20 - 0x1p+0f;
  const float t22 = t10 - t21;
  const float t23 = t22 + t19;
  const float t24 = t20 + t23;
  const float t25 = t8 * 0x1p-1f;
  const uint32_t t26 = (uint32_t)(int32_t)t25;
  const uint32_t t27 = (uint32_t)(int32_t)t8;
  const uint32_t t28 = t27 - t26;
  const uint32_t t29 = t26 + 127u;
  const uint32_t t30 = t29 << 23;
  const float t31 = as_float(t30);
  const uint32_t t32 = t28 + 127u;
  const uint32_t t33 = t32 << 23;
  const float t34 = as_float(t33);
  const float t35 = t24 * t31;
  const float t36 = t35 * t34;
  const float t37 = t1 ? x : t36;
  return t37;
}
/* routine softmax_rows */
__kernel void aj_softmax_rows_k0(__global unsigned char* p_e_0, const unsigned long o_e_0, __global unsigned char* p_x_1, const unsigned long o_x_1, __global unsigned char* p_y_2, const unsigned long o_y_2, __global unsigned char* p_m_3, const unsigned long o_m_3, __global unsigned char* p_se_4, const unsigned long o_se_4) {
  __global float* restrict e_0 = (__global float*)(p_e_0 + o_e_0);
  __global float* restrict x_1 = (__global float*)(p_x_1 + o_x_1);
  __global float* restrict y_2 = (__global float*)(p_y_2 + o_y_2);
  __global float* restrict m_3 = (__global float*)(p_m_3 + o_m_3);
  __global float* restrict se_4 = (__global float*)(p_se_4 + o_se_4);
  const long aj_gid = (long)get_global_id(0);
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long i0 = 0 + (long)aj_r;
  m_3[i0] = ((float)(-INFINITY));
  {
    float acc1 = ((float)m_3[i0]);
    for (long i1 = 0; i1 <= 999; ++i1) {
      acc1 = ((float)aj_fmaxf(acc1, ((float)x_1[(i0) * 1000 + i1])));
    }
    m_3[i0] = acc1;
  }
}
__kernel void aj_softmax_rows_k1(__global unsigned char* p_e_0, const unsigned long o_e_0, __global unsigned char* p_x_1, const unsigned long o_x_1, __global unsigned char* p_y_2, const unsigned long o_y_2, __global unsigned char* p_m_3, const unsigned long o_m_3, __global unsigned char* p_se_4, const unsigned long o_se_4) {
  __global float* restrict e_0 = (__global float*)(p_e_0 + o_e_0);
  __global float* restrict x_1 = (__global float*)(p_x_1 + o_x_1);
  __global float* restrict y_2 = (__global float*)(p_y_2 + o_y_2);
  __global float* restrict m_3 = (__global float*)(p_m_3 + o_m_3);
  __global float* restrict se_4 = (__global float*)(p_se_4 + o_se_4);
  const long aj_gid = (long)get_global_id(0);
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long i3 = 0 + (long)(aj_r % 1000u); aj_r /= 1000u;
  const long i2 = 0 + (long)aj_r;
  e_0[(i2) * 1000 + i3] = ((float)(((float)x_1[(i2) * 1000 + i3]) - ((float)m_3[i2])));
}
__kernel void aj_softmax_rows_k2(__global unsigned char* p_e_0, const unsigned long o_e_0, __global unsigned char* p_x_1, const unsigned long o_x_1, __global unsigned char* p_y_2, const unsigned long o_y_2, __global unsigned char* p_m_3, const unsigned long o_m_3, __global unsigned char* p_se_4, const unsigned long o_se_4) {
  __global float* restrict e_0 = (__global float*)(p_e_0 + o_e_0);
  __global float* restrict x_1 = (__global float*)(p_x_1 + o_x_1);
  __global float* restrict y_2 = (__global float*)(p_y_2 + o_y_2);
  __global float* restrict m_3 = (__global float*)(p_m_3 + o_m_3);
  __global float* restrict se_4 = (__global float*)(p_se_4 + o_se_4);
  const long aj_gid = (long)get_global_id(0);
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long i5 = 0 + (long)(aj_r % 1000u); aj_r /= 1000u;
  const long i4 = 0 + (long)aj_r;
  e_0[(i4) * 1000 + i5] = aj_expf(((float)e_0[(i4) * 1000 + i5]));
}
__kernel void aj_softmax_rows_k3(__global unsigned char* p_e_0, const unsigned long o_e_0, __global unsigned char* p_x_1, const unsigned long o_x_1, __global unsigned char* p_y_2, const unsigned long o_y_2, __global unsigned char* p_m_3, const unsigned long o_m_3, __global unsigned char* p_se_4, const unsigned long o_se_4) {
  __global float* restrict e_0 = (__global float*)(p_e_0 + o_e_0);
  __global float* restrict x_1 = (__global float*)(p_x_1 + o_x_1);
  __global float* restrict y_2 = (__global float*)(p_y_2 + o_y_2);
  __global float* restrict m_3 = (__global float*)(p_m_3 + o_m_3);
  __global float* restrict se_4 = (__global float*)(p_se_4 + o_se_4);
  const long aj_gid = (long)get_global_id(0);
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long i6 = 0 + (long)aj_r;
  se_4[i6] = ((float)0.0);
  for (long i7 = 0; i7 <= 14; ++i7) {
    {
      float v0_se = ((float)-0.0);
      for (long i8 = 0; i8 <= 63; ++i8) {
        v0_se = ((float)(((float)v0_se) + ((float)e_0[(i6) * 1000 + (64 * i7 + i8)])));
      }
      se_4[i6] = ((float)(((float)se_4[i6]) + ((float)v0_se)));
    }
  }
  {
    float v1_se = ((float)-0.0);
    for (long i9 = 0; i9 <= 39; ++i9) {
      v1_se = ((float)(((float)v1_se) + ((float)e_0[(i6) * 1000 + (i9 + 960)])));
    }
    se_4[i6] = ((float)(((float)se_4[i6]) + ((float)v1_se)));
  }
}
__kernel void aj_softmax_rows_k4(__global unsigned char* p_e_0, const unsigned long o_e_0, __global unsigned char* p_x_1, const unsigned long o_x_1, __global unsigned char* p_y_2, const unsigned long o_y_2, __global unsigned char* p_m_3, const unsigned long o_m_3, __global unsigned char* p_se_4, const unsigned long o_se_4) {
  __global float* restrict e_0 = (__global float*)(p_e_0 + o_e_0);
  __global float* restrict x_1 = (__global float*)(p_x_1 + o_x_1);
  __global float* restrict y_2 = (__global float*)(p_y_2 + o_y_2);
  __global float* restrict m_3 = (__global float*)(p_m_3 + o_m_3);
  __global float* restrict se_4 = (__global float*)(p_se_4 + o_se_4);
  const long aj_gid = (long)get_global_id(0);
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long i11 = 0 + (long)(aj_r % 1000u); aj_r /= 1000u;
  const long i10 = 0 + (long)aj_r;
  y_2[(i10) * 1000 + i11] = ((float)(((float)e_0[(i10) * 1000 + i11]) / ((float)se_4[i10])));
}
