/* launches:
   aj_layer_norm_k0: global 300, local None
   aj_layer_norm_k1: global 300, local None
   aj_layer_norm_k2: global 210000, local None
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
inline float aj_rsqrtf(float x) {
  const int t1 = x < 0x1p-126f;
  const float t2 = x * 0x1p+24f;
  const float t3 = t1 ? t2 : x;
  const uint32_t t4 = as_uint(t3);
  const uint32_t t5 = t4 >> 1;
  const uint32_t t6 = 1597463174u - t5;
  const float t7 = as_float(t6);
  const float t8 = t3 * 0x1p-1f;
  const float t9 = -t8;
  const float t10 = t7 * t7;
  const float t11 = fmaf(t9, t10, 0x1.8p+0f);
  const float t12 = t7 * t11;
  const float t13 = -t8;
  const float t14 = t12 * t12;
  const float t15 = fmaf(t13, t14, 0x1.8p+0f);
  const float t16 = t12 * t15;
  const float t17 = t3 * t16;
  const float t18 = -t17;
  const float t19 = fmaf(t3, t16, t18);
  const float t20 = -t19;
  const float t21 = -t17;
  const float t22 = fmaf(t21, t16, 0x1p+0f);
  const float t23 = fmaf(t20, t16, t22);
  const float t24 = t16 * 0x1p-1f;
  const float t25 = fmaf(t24, t23, t16);
  const float t26 = t25 * 0x1p+12f;
  const float t27 = t1 ? t26 : t25;
  const int t28 = x == ((float)(INFINITY));
  const float t29 = t28 ? 0x0p+0f : t27;
  const uint32_t t30 = as_uint(x);
  const uint32_t t31 = t30 & 2147483648u;
  const uint32_t t32 = t31 | 2139095040u;
  const float t33 = as_float(t32);
  const int t34 = x == 0x0p+0f;
  const float t35 = t34 ? t33 : t29;
  const int t36 = x >= 0x0p+0f;
  const int t37 = !t36;
  const float t38 = t37 ? ((float)NAN) : t35;
  return t38;
}
/* routine layer_norm */
__kernel void aj_layer_norm_k0(__global unsigned char* p_beta_0, const unsigned long o_beta_0, __global unsigned char* p_eps_1, const unsigned long o_eps_1, __global unsigned char* p_gamma_2, const unsigned long o_gamma_2, __global unsigned char* p_inv_n_3, const unsigned long o_inv_n_3, __global unsigned char* p_x_4, const unsigned long o_x_4, __global unsigned char* p_y_5, const unsigned long o_y_5, __global unsigned char* p_mean_6, const unsigned long o_mean_6, __global unsigned char* p_rstd_7, const unsigned long o_rstd_7) {
  __global float* restrict beta_0 = (__global float*)(p_beta_0 + o_beta_0);
  __global float* restrict eps_1 = (__global float*)(p_eps_1 + o_eps_1);
  __global float* restrict gamma_2 = (__global float*)(p_gamma_2 + o_gamma_2);
  __global float* restrict inv_n_3 = (__global float*)(p_inv_n_3 + o_inv_n_3);
  __global float* restrict x_4 = (__global float*)(p_x_4 + o_x_4);
  __global float* restrict y_5 = (__global float*)(p_y_5 + o_y_5);
  __global float* restrict mean_6 = (__global float*)(p_mean_6 + o_mean_6);
  __global float* restrict rstd_7 = (__global float*)(p_rstd_7 + o_rstd_7);
  const long aj_gid = (long)get_global_id(0);
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long i0 = 0 + (long)aj_r;
  {
    float v0_s = ((float)-0.0);
    v0_s = ((float)0.0);
    for (long i1 = 0; i1 <= 9; ++i1) {
      {
        float v1_s = ((float)-0.0);
        for (long i2 = 0; i2 <= 63; ++i2) {
          v1_s = ((float)(((float)v1_s) + ((float)x_4[(i0) * 700 + (64 * i1 + i2)])));
        }
        v0_s = ((float)(((float)v0_s) + ((float)v1_s)));
      }
    }
    {
      float v2_s = ((float)-0.0);
      for (long i3 = 0; i3 <= 59; ++i3) {
        v2_s = ((float)(((float)v2_s) + ((float)x_4[(i0) * 700 + (i3 + 640)])));
      }
      v0_s = ((float)(((float)v0_s) + ((float)v2_s)));
    }
    mean_6[i0] = ((float)(((float)v0_s) * ((float)inv_n_3[0])));
  }
}
__kernel void aj_layer_norm_k1(__global unsigned char* p_beta_0, const unsigned long o_beta_0, __global unsigned char* p_eps_1, const unsigned long o_eps_1, __global unsigned char* p_gamma_2, const unsigned long o_gamma_2, __global unsigned char* p_inv_n_3, const unsigned long o_inv_n_3, __global unsigned char* p_x_4, const unsigned long o_x_4, __global unsigned char* p_y_5, const unsigned long o_y_5, __global unsigned char* p_mean_6, const unsigned long o_mean_6, __global unsigned char* p_rstd_7, const unsigned long o_rstd_7) {
  __global float* restrict beta_0 = (__global float*)(p_beta_0 + o_beta_0);
  __global float* restrict eps_1 = (__global float*)(p_eps_1 + o_eps_1);
  __global float* restrict gamma_2 = (__global float*)(p_gamma_2 + o_gamma_2);
  __global float* restrict inv_n_3 = (__global float*)(p_inv_n_3 + o_inv_n_3);
  __global float* restrict x_4 = (__global float*)(p_x_4 + o_x_4);
  __global float* restrict y_5 = (__global float*)(p_y_5 + o_y_5);
  __global float* restrict mean_6 = (__global float*)(p_mean_6 + o_mean_6);
  __global float* restrict rstd_7 = (__global float*)(p_rstd_7 + o_rstd_7);
  const long aj_gid = (long)get_global_id(0);
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long i4 = 0 + (long)aj_r;
  {
    float v3_ss = ((float)-0.0);
    v3_ss = ((float)0.0);
    for (long i5 = 0; i5 <= 699; ++i5) {
      v3_ss = fmaf(((float)(((float)x_4[(i4) * 700 + i5]) - ((float)mean_6[i4]))), ((float)(((float)x_4[(i4) * 700 + i5]) - ((float)mean_6[i4]))), ((float)v3_ss));
    }
    rstd_7[i4] = aj_rsqrtf(((float)(((float)(((float)v3_ss) * ((float)inv_n_3[0]))) + ((float)eps_1[0]))));
  }
}
__kernel void aj_layer_norm_k2(__global unsigned char* p_beta_0, const unsigned long o_beta_0, __global unsigned char* p_eps_1, const unsigned long o_eps_1, __global unsigned char* p_gamma_2, const unsigned long o_gamma_2, __global unsigned char* p_inv_n_3, const unsigned long o_inv_n_3, __global unsigned char* p_x_4, const unsigned long o_x_4, __global unsigned char* p_y_5, const unsigned long o_y_5, __global unsigned char* p_mean_6, const unsigned long o_mean_6, __global unsigned char* p_rstd_7, const unsigned long o_rstd_7) {
  __global float* restrict beta_0 = (__global float*)(p_beta_0 + o_beta_0);
  __global float* restrict eps_1 = (__global float*)(p_eps_1 + o_eps_1);
  __global float* restrict gamma_2 = (__global float*)(p_gamma_2 + o_gamma_2);
  __global float* restrict inv_n_3 = (__global float*)(p_inv_n_3 + o_inv_n_3);
  __global float* restrict x_4 = (__global float*)(p_x_4 + o_x_4);
  __global float* restrict y_5 = (__global float*)(p_y_5 + o_y_5);
  __global float* restrict mean_6 = (__global float*)(p_mean_6 + o_mean_6);
  __global float* restrict rstd_7 = (__global float*)(p_rstd_7 + o_rstd_7);
  const long aj_gid = (long)get_global_id(0);
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long i7 = 0 + (long)(aj_r % 700u); aj_r /= 700u;
  const long i6 = 0 + (long)aj_r;
  y_5[(i6) * 700 + i7] = ((float)(((float)(((float)(((float)(((float)x_4[(i6) * 700 + i7]) - ((float)mean_6[i6]))) * ((float)rstd_7[i6]))) * ((float)gamma_2[i7]))) + ((float)beta_0[i7])));
}
