/* launches:
   aj_layer_norm_k0: global 300, local None
   aj_layer_norm_k1: global 38, local None
   aj_layer_norm_k2: global 210000, local None
*/
inline __attribute__((always_inline)) float aj_rsqrtf(float x) {
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
__kernel void aj_layer_norm_k0(__global unsigned char* p_x_4, const unsigned long o_x_4, __global unsigned char* p_mean_6, const unsigned long o_mean_6, __global unsigned char* p_inv_n_3, const unsigned long o_inv_n_3) {
  __global float* restrict x_4 = (__global float*)(p_x_4 + o_x_4);
  __global float* restrict mean_6 = (__global float*)(p_mean_6 + o_mean_6);
  __global float* restrict inv_n_3 = (__global float*)(p_inv_n_3 + o_inv_n_3);
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
__kernel void aj_layer_norm_k1(__global unsigned char* p_x_4, const unsigned long o_x_4, __global unsigned char* p_mean_6, const unsigned long o_mean_6, __global unsigned char* p_rstd_7, const unsigned long o_rstd_7, __global unsigned char* p_inv_n_3, const unsigned long o_inv_n_3, __global unsigned char* p_eps_1, const unsigned long o_eps_1) {
  __global float* restrict x_4 = (__global float*)(p_x_4 + o_x_4);
  __global float* restrict mean_6 = (__global float*)(p_mean_6 + o_mean_6);
  __global float* restrict rstd_7 = (__global float*)(p_rstd_7 + o_rstd_7);
  __global float* restrict inv_n_3 = (__global float*)(p_inv_n_3 + o_inv_n_3);
  __global float* restrict eps_1 = (__global float*)(p_eps_1 + o_eps_1);
  const long aj_gid = (long)get_global_id(0);
  const long aj_blk = aj_gid % 38;
  const long aj_b = (aj_blk % 38) * 8;
  const long aj_r0 = 0 + min(aj_b + 0, (long)299);
  const long aj_r1 = 0 + min(aj_b + 1, (long)299);
  const long aj_r2 = 0 + min(aj_b + 2, (long)299);
  const long aj_r3 = 0 + min(aj_b + 3, (long)299);
  const long aj_r4 = 0 + min(aj_b + 4, (long)299);
  const long aj_r5 = 0 + min(aj_b + 5, (long)299);
  const long aj_r6 = 0 + min(aj_b + 6, (long)299);
  const long aj_r7 = 0 + min(aj_b + 7, (long)299);
  float8 aj_v1 = ((float8)((float)-0.0));
  aj_v1 = ((float8)((float)0.0));
  for (long i4 = 0; i4 <= 699; ++i4) {
    {
      float8 aj_g2;
      { const long i5 = aj_r0; aj_g2.s0 = ((float)x_4[(i5) * 700 + i4]); }
      { const long i5 = aj_r1; aj_g2.s1 = ((float)x_4[(i5) * 700 + i4]); }
      { const long i5 = aj_r2; aj_g2.s2 = ((float)x_4[(i5) * 700 + i4]); }
      { const long i5 = aj_r3; aj_g2.s3 = ((float)x_4[(i5) * 700 + i4]); }
      { const long i5 = aj_r4; aj_g2.s4 = ((float)x_4[(i5) * 700 + i4]); }
      { const long i5 = aj_r5; aj_g2.s5 = ((float)x_4[(i5) * 700 + i4]); }
      { const long i5 = aj_r6; aj_g2.s6 = ((float)x_4[(i5) * 700 + i4]); }
      { const long i5 = aj_r7; aj_g2.s7 = ((float)x_4[(i5) * 700 + i4]); }
      float8 aj_g3;
      { const long i5 = aj_r0; aj_g3.s0 = ((float)mean_6[i5]); }
      { const long i5 = aj_r1; aj_g3.s1 = ((float)mean_6[i5]); }
      { const long i5 = aj_r2; aj_g3.s2 = ((float)mean_6[i5]); }
      { const long i5 = aj_r3; aj_g3.s3 = ((float)mean_6[i5]); }
      { const long i5 = aj_r4; aj_g3.s4 = ((float)mean_6[i5]); }
      { const long i5 = aj_r5; aj_g3.s5 = ((float)mean_6[i5]); }
      { const long i5 = aj_r6; aj_g3.s6 = ((float)mean_6[i5]); }
      { const long i5 = aj_r7; aj_g3.s7 = ((float)mean_6[i5]); }
      aj_v1 = fma((aj_g2 - aj_g3), (aj_g2 - aj_g3), aj_v1);
    }
  }
  if (aj_b + 0 < 300) { const long i5 = aj_r0; float v3_ss = aj_v1.s0; rstd_7[i5] = aj_rsqrtf(((float)(((float)(((float)v3_ss) * ((float)inv_n_3[0]))) + ((float)eps_1[0])))); }
  if (aj_b + 1 < 300) { const long i5 = aj_r1; float v3_ss = aj_v1.s1; rstd_7[i5] = aj_rsqrtf(((float)(((float)(((float)v3_ss) * ((float)inv_n_3[0]))) + ((float)eps_1[0])))); }
  if (aj_b + 2 < 300) { const long i5 = aj_r2; float v3_ss = aj_v1.s2; rstd_7[i5] = aj_rsqrtf(((float)(((float)(((float)v3_ss) * ((float)inv_n_3[0]))) + ((float)eps_1[0])))); }
  if (aj_b + 3 < 300) { const long i5 = aj_r3; float v3_ss = aj_v1.s3; rstd_7[i5] = aj_rsqrtf(((float)(((float)(((float)v3_ss) * ((float)inv_n_3[0]))) + ((float)eps_1[0])))); }
  if (aj_b + 4 < 300) { const long i5 = aj_r4; float v3_ss = aj_v1.s4; rstd_7[i5] = aj_rsqrtf(((float)(((float)(((float)v3_ss) * ((float)inv_n_3[0]))) + ((float)eps_1[0])))); }
  if (aj_b + 5 < 300) { const long i5 = aj_r5; float v3_ss = aj_v1.s5; rstd_7[i5] = aj_rsqrtf(((float)(((float)(((float)v3_ss) * ((float)inv_n_3[0]))) + ((float)eps_1[0])))); }
  if (aj_b + 6 < 300) { const long i5 = aj_r6; float v3_ss = aj_v1.s6; rstd_7[i5] = aj_rsqrtf(((float)(((float)(((float)v3_ss) * ((float)inv_n_3[0]))) + ((float)eps_1[0])))); }
  if (aj_b + 7 < 300) { const long i5 = aj_r7; float v3_ss = aj_v1.s7; rstd_7[i5] = aj_rsqrtf(((float)(((float)(((float)v3_ss) * ((float)inv_n_3[0]))) + ((float)eps_1[0])))); }
}
__kernel void aj_layer_norm_k2(__global unsigned char* p_y_5, const unsigned long o_y_5, __global unsigned char* p_x_4, const unsigned long o_x_4, __global unsigned char* p_mean_6, const unsigned long o_mean_6, __global unsigned char* p_rstd_7, const unsigned long o_rstd_7, __global unsigned char* p_gamma_2, const unsigned long o_gamma_2, __global unsigned char* p_beta_0, const unsigned long o_beta_0) {
  __global float* restrict y_5 = (__global float*)(p_y_5 + o_y_5);
  __global float* restrict x_4 = (__global float*)(p_x_4 + o_x_4);
  __global float* restrict mean_6 = (__global float*)(p_mean_6 + o_mean_6);
  __global float* restrict rstd_7 = (__global float*)(p_rstd_7 + o_rstd_7);
  __global float* restrict gamma_2 = (__global float*)(p_gamma_2 + o_gamma_2);
  __global float* restrict beta_0 = (__global float*)(p_beta_0 + o_beta_0);
  const long aj_gid = (long)get_global_id(0);
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long i7 = 0 + (long)(aj_r % 700u); aj_r /= 700u;
  const long i6 = 0 + (long)aj_r;
  y_5[(i6) * 700 + i7] = ((float)(((float)(((float)(((float)(((float)x_4[(i6) * 700 + i7]) - ((float)mean_6[i6]))) * ((float)rstd_7[i6]))) * ((float)gamma_2[i7]))) + ((float)beta_0[i7])));
}
