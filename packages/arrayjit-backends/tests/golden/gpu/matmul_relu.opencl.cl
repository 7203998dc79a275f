/* launches:
   aj_matmul_relu_k0: global 1024, local 256
   aj_matmul_relu_k1: global 7680, local None
*/
/* routine matmul_relu */
__kernel void aj_matmul_relu_k0(__global unsigned char* p_x_2, const unsigned long o_x_2, __global unsigned char* p_w_1, const unsigned long o_w_1, __global unsigned char* p_h_0, const unsigned long o_h_0) {
  __global float* restrict x_2 = (__global float*)(p_x_2 + o_x_2);
  __global float* restrict w_1 = (__global float*)(p_w_1 + o_w_1);
  __global float* restrict h_0 = (__global float*)(p_h_0 + o_h_0);
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
__kernel void aj_matmul_relu_k1(__global unsigned char* p_h_0, const unsigned long o_h_0, __global unsigned char* p_y_3, const unsigned long o_y_3) {
  __global float* restrict h_0 = (__global float*)(p_h_0 + o_h_0);
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
