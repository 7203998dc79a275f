/* launches:
   aj_two_layers_k0: global 256, local 256
   aj_two_layers_k1: global 512, local None
   aj_two_layers_k2: global 512, local None
   aj_two_layers_k0: global 256, local 256
   aj_two_layers_k1: global 512, local None
   aj_two_layers_k2: global 512, local None
*/
inline __attribute__((always_inline)) float aj_tanhf(float x) {
  const float t1 = fabsf(x);
  const float t2 = t1 * t1;
  const float t3 = t1 * t2;
  const float t4 = fmaf(t2, 0x1.19191cp-9f, -0x1.0c7e86p-7f);
  const float t5 = fmaf(t4, t2, 0x1.63b7bcp-6f);
  const float t6 = fmaf(t5, t2, -0x1.b9f38ep-5f);
  const float t7 = fmaf(t6, t2, 0x1.111082p-3f);
  const float t8 = fmaf(t7, t2, -0x1.555554p-2f);
  const float t9 = fmaf(t3, t8, t1);
  const int t10 = t1 > 0x1.19999ap-1f;
  const float t11 = t10 ? t1 : 0x1.19999ap-1f;
  const int t12 = t11 > 0x1.4p+3f;
  const float t13 = t12 ? 0x1.4p+3f : t11;
  const float t14 = t13 * -0x1p+1f;
  const float t15 = t14 * 0x1.715476p+0f;
  const float t16 = rintf(t15);
  const float t17 = -t16;
  const float t18 = fmaf(t17, 0x1.62e43p-1f, t14);
  const float t19 = t17 * -0x1.05c61p-29f;
  const float t20 = t18 + t19;
  const float t21 = fmaf(t20, 0x1.9df468p-13f, 0x1.6d4cfep-10f);
  const float t22 = fmaf(t21, t20, 0x1.111312p-7f);
  const float t23 = fmaf(t22, t20, 0x1.5554e8p-5f);
  const float t24 = fmaf(t23, t20, 0x1.555554p-3f);
  const float t25 = fmaf(t24, t20, 0x1p-1f);
  const float t26 = t20 * t20;
  const float t27 = fmaf(t26, t25, t19);
  const float t28 = t18 + 0x1p+0f;
  const float t29 = t28 - 0x1p+0f;
  const float t30 = t18 - t29;
  const float t31 = t30 + t27;
  const float t32 = t28 + t31;
  const float t33 = t32 - t28;
  const float t34 = t31 - t33;
  const uint32_t t35 = (uint32_t)(int32_t)t16;
  const uint32_t t36 = t35 + 127u;
  const uint32_t t37 = t36 << 23;
  const float t38 = as_float(t37);
  const float t39 = t32 * t38;
  const float t40 = t34 * t38;
  const float t41 = t39 + 0x1p+0f;
  const float t42 = t41 - 0x1p+0f;
  const float t43 = t39 - t42;
  const float t44 = t43 + t40;
  const float t45 = fmaf(t41, -0x1.7c0a8ep-1f, 0x1.bb61a6p+0f);
  const float t46 = -t41;
  const float t47 = fmaf(t46, t45, 0x1p+0f);
  const float t48 = fmaf(t45, t47, t45);
  const float t49 = -t41;
  const float t50 = fmaf(t49, t48, 0x1p+0f);
  const float t51 = fmaf(t48, t50, t48);
  const float t52 = t39 * 0x1p+1f;
  const float t53 = t52 * t51;
  const float t54 = -t53;
  const float t55 = fmaf(t54, t41, t52);
  const float t56 = -t53;
  const float t57 = t40 * 0x1p+1f;
  const float t58 = fmaf(t56, t44, t57);
  const float t59 = t55 + t58;
  const float t60 = t59 * t51;
  const float t61 = 0x1p+0f - t53;
  const float t62 = 0x1p+0f - t61;
  const float t63 = t62 - t53;
  const float t64 = t63 - t60;
  const float t65 = t61 + t64;
  const int t66 = t1 >= 0x1.19999ap-1f;
  const int t67 = !t66;
  const float t68 = t67 ? t9 : t65;
  const uint32_t t69 = as_uint(t68);
  const uint32_t t70 = as_uint(x);
  const uint32_t t71 = t70 & 2147483648u;
  const uint32_t t72 = t69 | t71;
  const float t73 = as_float(t72);
  return t73;
}
/* routine two_layers */
__kernel void aj_two_layers_k0(__global unsigned char* p_x_6, const unsigned long o_x_6, __global unsigned char* p_w1_4, const unsigned long o_w1_4, __global unsigned char* p_z1_7, const unsigned long o_z1_7) {
  __global float* restrict x_6 = (__global float*)(p_x_6 + o_x_6);
  __global float* restrict w1_4 = (__global float*)(p_w1_4 + o_w1_4);
  __global float* restrict z1_7 = (__global float*)(p_z1_7 + o_z1_7);
  const int aj_lid = (int)get_local_id(0);
  const long aj_grp = (long)get_group_id(0) % 1;
  const long aj_bi = (aj_grp / 1) * 64;
  const long aj_bj = (aj_grp % 1) * 64;
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
  aj_c0.s0 = (aj_i0 < 16 && aj_j0 < 32) ? (((float)0.0)) : 0;
  aj_c0.s1 = (aj_i0 < 16 && aj_j1 < 32) ? (((float)0.0)) : 0;
  aj_c0.s2 = (aj_i0 < 16 && aj_j2 < 32) ? (((float)0.0)) : 0;
  aj_c0.s3 = (aj_i0 < 16 && aj_j3 < 32) ? (((float)0.0)) : 0;
  float4 aj_c1;
  aj_c1.s0 = (aj_i1 < 16 && aj_j0 < 32) ? (((float)0.0)) : 0;
  aj_c1.s1 = (aj_i1 < 16 && aj_j1 < 32) ? (((float)0.0)) : 0;
  aj_c1.s2 = (aj_i1 < 16 && aj_j2 < 32) ? (((float)0.0)) : 0;
  aj_c1.s3 = (aj_i1 < 16 && aj_j3 < 32) ? (((float)0.0)) : 0;
  float4 aj_c2;
  aj_c2.s0 = (aj_i2 < 16 && aj_j0 < 32) ? (((float)0.0)) : 0;
  aj_c2.s1 = (aj_i2 < 16 && aj_j1 < 32) ? (((float)0.0)) : 0;
  aj_c2.s2 = (aj_i2 < 16 && aj_j2 < 32) ? (((float)0.0)) : 0;
  aj_c2.s3 = (aj_i2 < 16 && aj_j3 < 32) ? (((float)0.0)) : 0;
  float4 aj_c3;
  aj_c3.s0 = (aj_i3 < 16 && aj_j0 < 32) ? (((float)0.0)) : 0;
  aj_c3.s1 = (aj_i3 < 16 && aj_j1 < 32) ? (((float)0.0)) : 0;
  aj_c3.s2 = (aj_i3 < 16 && aj_j2 < 32) ? (((float)0.0)) : 0;
  aj_c3.s3 = (aj_i3 < 16 && aj_j3 < 32) ? (((float)0.0)) : 0;
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
  aj_pa0 = (aj_bi + aj_au0 < 16 && 0 + aj_av0 < 32) ? ((float)x_6[(0 + aj_bi + aj_au0) * 32 + 0 + 0 + aj_av0]) : 0;
  aj_pa1 = (aj_bi + aj_au1 < 16 && 0 + aj_av1 < 32) ? ((float)x_6[(0 + aj_bi + aj_au1) * 32 + 0 + 0 + aj_av1]) : 0;
  aj_pa2 = (aj_bi + aj_au2 < 16 && 0 + aj_av2 < 32) ? ((float)x_6[(0 + aj_bi + aj_au2) * 32 + 0 + 0 + aj_av2]) : 0;
  aj_pa3 = (aj_bi + aj_au3 < 16 && 0 + aj_av3 < 32) ? ((float)x_6[(0 + aj_bi + aj_au3) * 32 + 0 + 0 + aj_av3]) : 0;
  aj_pb0 = (aj_bj + aj_bv0 < 32 && 0 + aj_bu0 < 32) ? ((float)w1_4[(0 + 0 + aj_bu0) * 32 + 0 + aj_bj + aj_bv0]) : 0;
  aj_pb1 = (aj_bj + aj_bv1 < 32 && 0 + aj_bu1 < 32) ? ((float)w1_4[(0 + 0 + aj_bu1) * 32 + 0 + aj_bj + aj_bv1]) : 0;
  aj_pb2 = (aj_bj + aj_bv2 < 32 && 0 + aj_bu2 < 32) ? ((float)w1_4[(0 + 0 + aj_bu2) * 32 + 0 + aj_bj + aj_bv2]) : 0;
  aj_pb3 = (aj_bj + aj_bv3 < 32 && 0 + aj_bu3 < 32) ? ((float)w1_4[(0 + 0 + aj_bu3) * 32 + 0 + aj_bj + aj_bv3]) : 0;
  aj_ta[aj_av0][aj_au0] = aj_pa0;
  aj_ta[aj_av1][aj_au1] = aj_pa1;
  aj_ta[aj_av2][aj_au2] = aj_pa2;
  aj_ta[aj_av3][aj_au3] = aj_pa3;
  aj_tb[aj_bu0][aj_bv0] = aj_pb0;
  aj_tb[aj_bu1][aj_bv1] = aj_pb1;
  aj_tb[aj_bu2][aj_bv2] = aj_pb2;
  aj_tb[aj_bu3][aj_bv3] = aj_pb3;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int aj_kt = 0; aj_kt < 32; aj_kt += 16) {
    const int aj_more = aj_kt + 16 < 32;
    if (aj_more) {
      aj_pa0 = (aj_bi + aj_au0 < 16 && (aj_kt + 16) + aj_av0 < 32) ? ((float)x_6[(0 + aj_bi + aj_au0) * 32 + 0 + (aj_kt + 16) + aj_av0]) : 0;
      aj_pa1 = (aj_bi + aj_au1 < 16 && (aj_kt + 16) + aj_av1 < 32) ? ((float)x_6[(0 + aj_bi + aj_au1) * 32 + 0 + (aj_kt + 16) + aj_av1]) : 0;
      aj_pa2 = (aj_bi + aj_au2 < 16 && (aj_kt + 16) + aj_av2 < 32) ? ((float)x_6[(0 + aj_bi + aj_au2) * 32 + 0 + (aj_kt + 16) + aj_av2]) : 0;
      aj_pa3 = (aj_bi + aj_au3 < 16 && (aj_kt + 16) + aj_av3 < 32) ? ((float)x_6[(0 + aj_bi + aj_au3) * 32 + 0 + (aj_kt + 16) + aj_av3]) : 0;
      aj_pb0 = (aj_bj + aj_bv0 < 32 && (aj_kt + 16) + aj_bu0 < 32) ? ((float)w1_4[(0 + (aj_kt + 16) + aj_bu0) * 32 + 0 + aj_bj + aj_bv0]) : 0;
      aj_pb1 = (aj_bj + aj_bv1 < 32 && (aj_kt + 16) + aj_bu1 < 32) ? ((float)w1_4[(0 + (aj_kt + 16) + aj_bu1) * 32 + 0 + aj_bj + aj_bv1]) : 0;
      aj_pb2 = (aj_bj + aj_bv2 < 32 && (aj_kt + 16) + aj_bu2 < 32) ? ((float)w1_4[(0 + (aj_kt + 16) + aj_bu2) * 32 + 0 + aj_bj + aj_bv2]) : 0;
      aj_pb3 = (aj_bj + aj_bv3 < 32 && (aj_kt + 16) + aj_bu3 < 32) ? ((float)w1_4[(0 + (aj_kt + 16) + aj_bu3) * 32 + 0 + aj_bj + aj_bv3]) : 0;
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
  if (aj_i0 < 16 && aj_j0 < 32) z1_7[(0 + aj_i0) * 32 + 0 + aj_j0] = aj_c0.s0;
  if (aj_i0 < 16 && aj_j1 < 32) z1_7[(0 + aj_i0) * 32 + 0 + aj_j1] = aj_c0.s1;
  if (aj_i0 < 16 && aj_j2 < 32) z1_7[(0 + aj_i0) * 32 + 0 + aj_j2] = aj_c0.s2;
  if (aj_i0 < 16 && aj_j3 < 32) z1_7[(0 + aj_i0) * 32 + 0 + aj_j3] = aj_c0.s3;
  if (aj_i1 < 16 && aj_j0 < 32) z1_7[(0 + aj_i1) * 32 + 0 + aj_j0] = aj_c1.s0;
  if (aj_i1 < 16 && aj_j1 < 32) z1_7[(0 + aj_i1) * 32 + 0 + aj_j1] = aj_c1.s1;
  if (aj_i1 < 16 && aj_j2 < 32) z1_7[(0 + aj_i1) * 32 + 0 + aj_j2] = aj_c1.s2;
  if (aj_i1 < 16 && aj_j3 < 32) z1_7[(0 + aj_i1) * 32 + 0 + aj_j3] = aj_c1.s3;
  if (aj_i2 < 16 && aj_j0 < 32) z1_7[(0 + aj_i2) * 32 + 0 + aj_j0] = aj_c2.s0;
  if (aj_i2 < 16 && aj_j1 < 32) z1_7[(0 + aj_i2) * 32 + 0 + aj_j1] = aj_c2.s1;
  if (aj_i2 < 16 && aj_j2 < 32) z1_7[(0 + aj_i2) * 32 + 0 + aj_j2] = aj_c2.s2;
  if (aj_i2 < 16 && aj_j3 < 32) z1_7[(0 + aj_i2) * 32 + 0 + aj_j3] = aj_c2.s3;
  if (aj_i3 < 16 && aj_j0 < 32) z1_7[(0 + aj_i3) * 32 + 0 + aj_j0] = aj_c3.s0;
  if (aj_i3 < 16 && aj_j1 < 32) z1_7[(0 + aj_i3) * 32 + 0 + aj_j1] = aj_c3.s1;
  if (aj_i3 < 16 && aj_j2 < 32) z1_7[(0 + aj_i3) * 32 + 0 + aj_j2] = aj_c3.s2;
  if (aj_i3 < 16 && aj_j3 < 32) z1_7[(0 + aj_i3) * 32 + 0 + aj_j3] = aj_c3.s3;
}
__kernel void aj_two_layers_k1(__global unsigned char* p_z1_7, const unsigned long o_z1_7, __global unsigned char* p_b1_0, const unsigned long o_b1_0) {
  __global float* restrict z1_7 = (__global float*)(p_z1_7 + o_z1_7);
  __global float* restrict b1_0 = (__global float*)(p_b1_0 + o_b1_0);
  const long aj_gid = (long)get_global_id(0);
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long i1 = 0 + (long)(aj_r % 32u); aj_r /= 32u;
  const long i0 = 0 + (long)aj_r;
  z1_7[(i0) * 32 + i1] = ((float)(((float)z1_7[(i0) * 32 + i1]) + ((float)b1_0[i1])));
}
__kernel void aj_two_layers_k2(__global unsigned char* p_h1_2, const unsigned long o_h1_2, __global unsigned char* p_z1_7, const unsigned long o_z1_7) {
  __global float* restrict h1_2 = (__global float*)(p_h1_2 + o_h1_2);
  __global float* restrict z1_7 = (__global float*)(p_z1_7 + o_z1_7);
  const long aj_gid = (long)get_global_id(0);
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long i3 = 0 + (long)(aj_r % 32u); aj_r /= 32u;
  const long i2 = 0 + (long)aj_r;
  h1_2[(i2) * 32 + i3] = aj_tanhf(((float)z1_7[(i2) * 32 + i3]));
}
