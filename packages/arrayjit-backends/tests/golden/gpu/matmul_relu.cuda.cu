/* launches:
   aj_matmul_relu_k0: global 1024, local 256
   aj_matmul_relu_k1: global 7680, local None
*/
/* routine matmul_relu */
extern "C" __global__ void aj_matmul_relu_k0(float* __restrict__ x_2, float* __restrict__ w_1, float* __restrict__ h_0) {
  const int aj_lid = (int)threadIdx.x;
  const long long aj_grp = (long long)blockIdx.x % 4;
  const long long aj_bi = (aj_grp / 2) * 64;
  const long long aj_bj = (aj_grp % 2) * 64;
  const int aj_ty = aj_lid / 16, aj_tx = aj_lid % 16;
  __shared__ __align__(16) float aj_ta[16][68];
  __shared__ __align__(16) float aj_tb[16][64];
  const long long aj_i0 = aj_bi + aj_ty * 4 + 0;
  const long long aj_i1 = aj_bi + aj_ty * 4 + 1;
  const long long aj_i2 = aj_bi + aj_ty * 4 + 2;
  const long long aj_i3 = aj_bi + aj_ty * 4 + 3;
  const long long aj_j0 = aj_bj + aj_tx * 4 + 0;
  const long long aj_j1 = aj_bj + aj_tx * 4 + 1;
  const long long aj_j2 = aj_bj + aj_tx * 4 + 2;
  const long long aj_j3 = aj_bj + aj_tx * 4 + 3;
  float aj_c0_0 = (aj_i0 < 96 && aj_j0 < 80) ? (((float)0.0)) : 0;
  float aj_c0_1 = (aj_i0 < 96 && aj_j1 < 80) ? (((float)0.0)) : 0;
  float aj_c0_2 = (aj_i0 < 96 && aj_j2 < 80) ? (((float)0.0)) : 0;
  float aj_c0_3 = (aj_i0 < 96 && aj_j3 < 80) ? (((float)0.0)) : 0;
  float aj_c1_0 = (aj_i1 < 96 && aj_j0 < 80) ? (((float)0.0)) : 0;
  float aj_c1_1 = (aj_i1 < 96 && aj_j1 < 80) ? (((float)0.0)) : 0;
  float aj_c1_2 = (aj_i1 < 96 && aj_j2 < 80) ? (((float)0.0)) : 0;
  float aj_c1_3 = (aj_i1 < 96 && aj_j3 < 80) ? (((float)0.0)) : 0;
  float aj_c2_0 = (aj_i2 < 96 && aj_j0 < 80) ? (((float)0.0)) : 0;
  float aj_c2_1 = (aj_i2 < 96 && aj_j1 < 80) ? (((float)0.0)) : 0;
  float aj_c2_2 = (aj_i2 < 96 && aj_j2 < 80) ? (((float)0.0)) : 0;
  float aj_c2_3 = (aj_i2 < 96 && aj_j3 < 80) ? (((float)0.0)) : 0;
  float aj_c3_0 = (aj_i3 < 96 && aj_j0 < 80) ? (((float)0.0)) : 0;
  float aj_c3_1 = (aj_i3 < 96 && aj_j1 < 80) ? (((float)0.0)) : 0;
  float aj_c3_2 = (aj_i3 < 96 && aj_j2 < 80) ? (((float)0.0)) : 0;
  float aj_c3_3 = (aj_i3 < 96 && aj_j3 < 80) ? (((float)0.0)) : 0;
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
  __syncthreads();
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
      const float4 aj_vec_a0 = (*(const float4*)&aj_ta[aj_s][aj_ty * 4 + 0]);
      const float aj_a0 = aj_vec_a0.x;
      const float aj_a1 = aj_vec_a0.y;
      const float aj_a2 = aj_vec_a0.z;
      const float aj_a3 = aj_vec_a0.w;
      const float4 aj_vec_b0 = (*(const float4*)&aj_tb[aj_s][aj_tx * 4 + 0]);
      const float aj_b0 = aj_vec_b0.x;
      const float aj_b1 = aj_vec_b0.y;
      const float aj_b2 = aj_vec_b0.z;
      const float aj_b3 = aj_vec_b0.w;
      aj_c0_0 = fmaf(aj_a0, aj_b0, aj_c0_0);
      aj_c0_1 = fmaf(aj_a0, aj_b1, aj_c0_1);
      aj_c0_2 = fmaf(aj_a0, aj_b2, aj_c0_2);
      aj_c0_3 = fmaf(aj_a0, aj_b3, aj_c0_3);
      aj_c1_0 = fmaf(aj_a1, aj_b0, aj_c1_0);
      aj_c1_1 = fmaf(aj_a1, aj_b1, aj_c1_1);
      aj_c1_2 = fmaf(aj_a1, aj_b2, aj_c1_2);
      aj_c1_3 = fmaf(aj_a1, aj_b3, aj_c1_3);
      aj_c2_0 = fmaf(aj_a2, aj_b0, aj_c2_0);
      aj_c2_1 = fmaf(aj_a2, aj_b1, aj_c2_1);
      aj_c2_2 = fmaf(aj_a2, aj_b2, aj_c2_2);
      aj_c2_3 = fmaf(aj_a2, aj_b3, aj_c2_3);
      aj_c3_0 = fmaf(aj_a3, aj_b0, aj_c3_0);
      aj_c3_1 = fmaf(aj_a3, aj_b1, aj_c3_1);
      aj_c3_2 = fmaf(aj_a3, aj_b2, aj_c3_2);
      aj_c3_3 = fmaf(aj_a3, aj_b3, aj_c3_3);
    }
    __syncthreads();
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
    __syncthreads();
  }
  for (int aj_s = 0; aj_s < 8; ++aj_s) {
    const float4 aj_vec_a0 = (*(const float4*)&aj_ta[aj_s][aj_ty * 4 + 0]);
    const float aj_a0 = aj_vec_a0.x;
    const float aj_a1 = aj_vec_a0.y;
    const float aj_a2 = aj_vec_a0.z;
    const float aj_a3 = aj_vec_a0.w;
    const float4 aj_vec_b0 = (*(const float4*)&aj_tb[aj_s][aj_tx * 4 + 0]);
    const float aj_b0 = aj_vec_b0.x;
    const float aj_b1 = aj_vec_b0.y;
    const float aj_b2 = aj_vec_b0.z;
    const float aj_b3 = aj_vec_b0.w;
    aj_c0_0 = fmaf(aj_a0, aj_b0, aj_c0_0);
    aj_c0_1 = fmaf(aj_a0, aj_b1, aj_c0_1);
    aj_c0_2 = fmaf(aj_a0, aj_b2, aj_c0_2);
    aj_c0_3 = fmaf(aj_a0, aj_b3, aj_c0_3);
    aj_c1_0 = fmaf(aj_a1, aj_b0, aj_c1_0);
    aj_c1_1 = fmaf(aj_a1, aj_b1, aj_c1_1);
    aj_c1_2 = fmaf(aj_a1, aj_b2, aj_c1_2);
    aj_c1_3 = fmaf(aj_a1, aj_b3, aj_c1_3);
    aj_c2_0 = fmaf(aj_a2, aj_b0, aj_c2_0);
    aj_c2_1 = fmaf(aj_a2, aj_b1, aj_c2_1);
    aj_c2_2 = fmaf(aj_a2, aj_b2, aj_c2_2);
    aj_c2_3 = fmaf(aj_a2, aj_b3, aj_c2_3);
    aj_c3_0 = fmaf(aj_a3, aj_b0, aj_c3_0);
    aj_c3_1 = fmaf(aj_a3, aj_b1, aj_c3_1);
    aj_c3_2 = fmaf(aj_a3, aj_b2, aj_c3_2);
    aj_c3_3 = fmaf(aj_a3, aj_b3, aj_c3_3);
  }
  if (aj_i0 < 96 && aj_j0 < 80) h_0[(0 + aj_i0) * 80 + 0 + aj_j0] = aj_c0_0;
  if (aj_i0 < 96 && aj_j1 < 80) h_0[(0 + aj_i0) * 80 + 0 + aj_j1] = aj_c0_1;
  if (aj_i0 < 96 && aj_j2 < 80) h_0[(0 + aj_i0) * 80 + 0 + aj_j2] = aj_c0_2;
  if (aj_i0 < 96 && aj_j3 < 80) h_0[(0 + aj_i0) * 80 + 0 + aj_j3] = aj_c0_3;
  if (aj_i1 < 96 && aj_j0 < 80) h_0[(0 + aj_i1) * 80 + 0 + aj_j0] = aj_c1_0;
  if (aj_i1 < 96 && aj_j1 < 80) h_0[(0 + aj_i1) * 80 + 0 + aj_j1] = aj_c1_1;
  if (aj_i1 < 96 && aj_j2 < 80) h_0[(0 + aj_i1) * 80 + 0 + aj_j2] = aj_c1_2;
  if (aj_i1 < 96 && aj_j3 < 80) h_0[(0 + aj_i1) * 80 + 0 + aj_j3] = aj_c1_3;
  if (aj_i2 < 96 && aj_j0 < 80) h_0[(0 + aj_i2) * 80 + 0 + aj_j0] = aj_c2_0;
  if (aj_i2 < 96 && aj_j1 < 80) h_0[(0 + aj_i2) * 80 + 0 + aj_j1] = aj_c2_1;
  if (aj_i2 < 96 && aj_j2 < 80) h_0[(0 + aj_i2) * 80 + 0 + aj_j2] = aj_c2_2;
  if (aj_i2 < 96 && aj_j3 < 80) h_0[(0 + aj_i2) * 80 + 0 + aj_j3] = aj_c2_3;
  if (aj_i3 < 96 && aj_j0 < 80) h_0[(0 + aj_i3) * 80 + 0 + aj_j0] = aj_c3_0;
  if (aj_i3 < 96 && aj_j1 < 80) h_0[(0 + aj_i3) * 80 + 0 + aj_j1] = aj_c3_1;
  if (aj_i3 < 96 && aj_j2 < 80) h_0[(0 + aj_i3) * 80 + 0 + aj_j2] = aj_c3_2;
  if (aj_i3 < 96 && aj_j3 < 80) h_0[(0 + aj_i3) * 80 + 0 + aj_j3] = aj_c3_3;
}
extern "C" __global__ void aj_matmul_relu_k1(float* __restrict__ h_0, float* __restrict__ y_3) {
  const long long aj_gid = (long long)(blockIdx.x * (long long)blockDim.x + threadIdx.x);
  if (aj_gid >= 7680) return;
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long long i1 = 0 + (long long)(aj_r % 80u); aj_r /= 80u;
  const long long i0 = 0 + (long long)aj_r;
  {
    const float t1 = ((float)h_0[(i0) * 80 + i1]);
    y_3[(i0) * 80 + i1] = ((float)(!(t1 <= 0) ? t1 : 0));
  }
}
