/* launches:
   aj_softmax_rows_k0: global 512, local None
   aj_softmax_rows_k1: global 512000, local None
   aj_softmax_rows_k2: global 512000, local None
   aj_softmax_rows_k3: global 512, local None
   aj_softmax_rows_k4: global 512000, local None
*/
inline __attribute__((always_inline)) float aj_expf(float x) {
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
__kernel void aj_softmax_rows_k0(__global unsigned char* p_m_3, const unsigned long o_m_3, __global unsigned char* p_x_1, const unsigned long o_x_1) {
  __global float* restrict m_3 = (__global float*)(p_m_3 + o_m_3);
  __global float* restrict x_1 = (__global float*)(p_x_1 + o_x_1);
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
__kernel void aj_softmax_rows_k1(__global unsigned char* p_e_0, const unsigned long o_e_0, __global unsigned char* p_x_1, const unsigned long o_x_1, __global unsigned char* p_m_3, const unsigned long o_m_3) {
  __global float* restrict e_0 = (__global float*)(p_e_0 + o_e_0);
  __global float* restrict x_1 = (__global float*)(p_x_1 + o_x_1);
  __global float* restrict m_3 = (__global float*)(p_m_3 + o_m_3);
  const long aj_gid = (long)get_global_id(0);
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long i3 = 0 + (long)(aj_r % 1000u); aj_r /= 1000u;
  const long i2 = 0 + (long)aj_r;
  e_0[(i2) * 1000 + i3] = ((float)(((float)x_1[(i2) * 1000 + i3]) - ((float)m_3[i2])));
}
__kernel void aj_softmax_rows_k2(__global unsigned char* p_e_0, const unsigned long o_e_0) {
  __global float* restrict e_0 = (__global float*)(p_e_0 + o_e_0);
  const long aj_gid = (long)get_global_id(0);
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long i5 = 0 + (long)(aj_r % 1000u); aj_r /= 1000u;
  const long i4 = 0 + (long)aj_r;
  e_0[(i4) * 1000 + i5] = aj_expf(((float)e_0[(i4) * 1000 + i5]));
}
__kernel void aj_softmax_rows_k3(__global unsigned char* p_se_4, const unsigned long o_se_4, __global unsigned char* p_e_0, const unsigned long o_e_0) {
  __global float* restrict se_4 = (__global float*)(p_se_4 + o_se_4);
  __global float* restrict e_0 = (__global float*)(p_e_0 + o_e_0);
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
__kernel void aj_softmax_rows_k4(__global unsigned char* p_y_2, const unsigned long o_y_2, __global unsigned char* p_e_0, const unsigned long o_e_0, __global unsigned char* p_se_4, const unsigned long o_se_4) {
  __global float* restrict y_2 = (__global float*)(p_y_2 + o_y_2);
  __global float* restrict e_0 = (__global float*)(p_e_0 + o_e_0);
  __global float* restrict se_4 = (__global float*)(p_se_4 + o_se_4);
  const long aj_gid = (long)get_global_id(0);
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long i11 = 0 + (long)(aj_r % 1000u); aj_r /= 1000u;
  const long i10 = 0 + (long)aj_r;
  y_2[(i10) * 1000 + i11] = ((float)(((float)e_0[(i10) * 1000 + i11]) / ((float)se_4[i10])));
}
