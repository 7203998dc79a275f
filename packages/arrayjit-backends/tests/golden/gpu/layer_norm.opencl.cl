/* launches:
   aj_layer_norm_k0: global 19200, local 64
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
__kernel void aj_layer_norm_k0(__global unsigned char* p_x_4, const unsigned long o_x_4, __global unsigned char* p_inv_n_3, const unsigned long o_inv_n_3, __global unsigned char* p_eps_1, const unsigned long o_eps_1, __global unsigned char* p_y_5, const unsigned long o_y_5, __global unsigned char* p_gamma_2, const unsigned long o_gamma_2, __global unsigned char* p_beta_0, const unsigned long o_beta_0) {
  __global float* restrict x_4 = (__global float*)(p_x_4 + o_x_4);
  __global float* restrict inv_n_3 = (__global float*)(p_inv_n_3 + o_inv_n_3);
  __global float* restrict eps_1 = (__global float*)(p_eps_1 + o_eps_1);
  __global float* restrict y_5 = (__global float*)(p_y_5 + o_y_5);
  __global float* restrict gamma_2 = (__global float*)(p_gamma_2 + o_gamma_2);
  __global float* restrict beta_0 = (__global float*)(p_beta_0 + o_beta_0);
  __local float aj_sh[64];
  __local float row_mean_6[1];
  __local float row_rstd_7[1];
  const int aj_lid = (int)get_local_id(0);
  {
    float v0_s;
    {
      uint32_t aj_r = ((uint32_t)get_group_id(0));
      const long i0 = 0 + (long)aj_r;
      float aj_acc = ((float)-0.0);
      {
        for (long aj_t = aj_lid; aj_t < 640; aj_t += 64) {
          uint32_t aj_r = ((uint32_t)aj_t);
          const long i2 = 0 + (long)(aj_r % 64u); aj_r /= 64u;
          const long i1 = 0 + (long)aj_r;
          aj_acc = ((float)(aj_acc + ((float)x_4[(i0) * 700 + (64 * i1 + i2)])));
        }
      }
      {
        for (long aj_t = aj_lid; aj_t < 60; aj_t += 64) {
          uint32_t aj_r = ((uint32_t)aj_t);
          const long i3 = 0 + (long)aj_r;
          aj_acc = ((float)(aj_acc + ((float)x_4[(i0) * 700 + (i3 + 640)])));
        }
      }
      aj_sh[aj_lid] = aj_acc;
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int aj_s = 32; aj_s > 0; aj_s >>= 1) {
        if (aj_lid < aj_s) aj_sh[aj_lid] = ((float)(aj_sh[aj_lid] + aj_sh[aj_lid + aj_s]));
        barrier(CLK_LOCAL_MEM_FENCE);
      }
      v0_s = ((float)(((float)0.0) + aj_sh[0]));
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (aj_lid == 0) {
      {
        uint32_t aj_r = ((uint32_t)get_group_id(0));
        const long i0 = 0 + (long)aj_r;
        row_mean_6[0] = ((float)(((float)v0_s) * ((float)inv_n_3[0])));
      }
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
  {
    float v1_ss;
    {
      uint32_t aj_r = ((uint32_t)get_group_id(0));
      const long i4 = 0 + (long)aj_r;
      float aj_acc = ((float)-0.0);
      {
        for (long aj_t = aj_lid; aj_t < 700; aj_t += 64) {
          uint32_t aj_r = ((uint32_t)aj_t);
          const long i5 = 0 + (long)aj_r;
          aj_acc = fmaf(((float)(((float)x_4[(i4) * 700 + i5]) - ((float)row_mean_6[0]))), ((float)(((float)x_4[(i4) * 700 + i5]) - ((float)row_mean_6[0]))), aj_acc);
        }
      }
      aj_sh[aj_lid] = aj_acc;
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int aj_s = 32; aj_s > 0; aj_s >>= 1) {
        if (aj_lid < aj_s) aj_sh[aj_lid] = ((float)(aj_sh[aj_lid] + aj_sh[aj_lid + aj_s]));
        barrier(CLK_LOCAL_MEM_FENCE);
      }
      v1_ss = ((float)(((float)0.0) + aj_sh[0]));
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (aj_lid == 0) {
      {
        uint32_t aj_r = ((uint32_t)get_group_id(0));
        const long i4 = 0 + (long)aj_r;
        row_rstd_7[0] = aj_rsqrtf(((float)(((float)(((float)v1_ss) * ((float)inv_n_3[0]))) + ((float)eps_1[0]))));
      }
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
  {
    for (long aj_b = 0; aj_b < 700; aj_b += 64) {
      const long aj_c = aj_b + aj_lid;
      if (aj_c < 700) {
        {
          uint32_t aj_r = ((uint32_t)get_group_id(0));
          const long i6 = 0 + (long)aj_r;
          {
            uint32_t aj_r = ((uint32_t)aj_c);
            const long i7 = 0 + (long)aj_r;
            y_5[(i6) * 700 + i7] = ((float)(((float)(((float)(((float)(((float)x_4[(i6) * 700 + i7]) - ((float)row_mean_6[0]))) * ((float)row_rstd_7[0]))) * ((float)gamma_2[i7]))) + ((float)beta_0[i7])));
          }
        }
      }
    }
  }
}
