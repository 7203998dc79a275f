/* launches:
   aj_matmul_relu_k0: global 120, local None
   aj_matmul_relu_k1: global 7680, local None
*/
/* routine matmul_relu */
__kernel void aj_matmul_relu_k0(__global unsigned char* p_w_1, const unsigned long o_w_1, __global unsigned char* p_x_2, const unsigned long o_x_2, __global unsigned char* p_h_0, const unsigned long o_h_0) {
  __global float* restrict w_1 = (__global float*)(p_w_1 + o_w_1);
  __global float* restrict x_2 = (__global float*)(p_x_2 + o_x_2);
  __global float* restrict h_0 = (__global float*)(p_h_0 + o_h_0);
  const long aj_gid = (long)get_global_id(0);
  const long aj_blk = aj_gid % 120;
  const long aj_bi = (aj_blk / 10) * 8;
  const long aj_bj = (aj_blk % 10) * 8;
  const long aj_i0 = min(aj_bi + 0, (long)95);
  const long aj_i1 = min(aj_bi + 1, (long)95);
  const long aj_i2 = min(aj_bi + 2, (long)95);
  const long aj_i3 = min(aj_bi + 3, (long)95);
  const long aj_i4 = min(aj_bi + 4, (long)95);
  const long aj_i5 = min(aj_bi + 5, (long)95);
  const long aj_i6 = min(aj_bi + 6, (long)95);
  const long aj_i7 = min(aj_bi + 7, (long)95);
  const long aj_j0 = min(aj_bj + 0, (long)79);
  const long aj_j1 = min(aj_bj + 1, (long)79);
  const long aj_j2 = min(aj_bj + 2, (long)79);
  const long aj_j3 = min(aj_bj + 3, (long)79);
  const long aj_j4 = min(aj_bj + 4, (long)79);
  const long aj_j5 = min(aj_bj + 5, (long)79);
  const long aj_j6 = min(aj_bj + 6, (long)79);
  const long aj_j7 = min(aj_bj + 7, (long)79);
  float8 aj_c0 = (float8)(((float)0.0));
  float8 aj_c1 = (float8)(((float)0.0));
  float8 aj_c2 = (float8)(((float)0.0));
  float8 aj_c3 = (float8)(((float)0.0));
  float8 aj_c4 = (float8)(((float)0.0));
  float8 aj_c5 = (float8)(((float)0.0));
  float8 aj_c6 = (float8)(((float)0.0));
  float8 aj_c7 = (float8)(((float)0.0));
  for (long aj_s = 0; aj_s < 72; ++aj_s) {
    const float8 aj_b = (float8)((float)w_1[(0 + aj_s) * 80 + 0 + aj_j0], (float)w_1[(0 + aj_s) * 80 + 0 + aj_j1], (float)w_1[(0 + aj_s) * 80 + 0 + aj_j2], (float)w_1[(0 + aj_s) * 80 + 0 + aj_j3], (float)w_1[(0 + aj_s) * 80 + 0 + aj_j4], (float)w_1[(0 + aj_s) * 80 + 0 + aj_j5], (float)w_1[(0 + aj_s) * 80 + 0 + aj_j6], (float)w_1[(0 + aj_s) * 80 + 0 + aj_j7]);
    aj_c0 = fma(((float8)((float)x_2[(0 + aj_i0) * 72 + 0 + aj_s])), aj_b, aj_c0);
    aj_c1 = fma(((float8)((float)x_2[(0 + aj_i1) * 72 + 0 + aj_s])), aj_b, aj_c1);
    aj_c2 = fma(((float8)((float)x_2[(0 + aj_i2) * 72 + 0 + aj_s])), aj_b, aj_c2);
    aj_c3 = fma(((float8)((float)x_2[(0 + aj_i3) * 72 + 0 + aj_s])), aj_b, aj_c3);
    aj_c4 = fma(((float8)((float)x_2[(0 + aj_i4) * 72 + 0 + aj_s])), aj_b, aj_c4);
    aj_c5 = fma(((float8)((float)x_2[(0 + aj_i5) * 72 + 0 + aj_s])), aj_b, aj_c5);
    aj_c6 = fma(((float8)((float)x_2[(0 + aj_i6) * 72 + 0 + aj_s])), aj_b, aj_c6);
    aj_c7 = fma(((float8)((float)x_2[(0 + aj_i7) * 72 + 0 + aj_s])), aj_b, aj_c7);
  }
  if (aj_bi + 0 < 96 && aj_bj + 0 < 80) h_0[(0 + aj_i0) * 80 + 0 + aj_j0] = aj_c0.s0;
  if (aj_bi + 0 < 96 && aj_bj + 1 < 80) h_0[(0 + aj_i0) * 80 + 0 + aj_j1] = aj_c0.s1;
  if (aj_bi + 0 < 96 && aj_bj + 2 < 80) h_0[(0 + aj_i0) * 80 + 0 + aj_j2] = aj_c0.s2;
  if (aj_bi + 0 < 96 && aj_bj + 3 < 80) h_0[(0 + aj_i0) * 80 + 0 + aj_j3] = aj_c0.s3;
  if (aj_bi + 0 < 96 && aj_bj + 4 < 80) h_0[(0 + aj_i0) * 80 + 0 + aj_j4] = aj_c0.s4;
  if (aj_bi + 0 < 96 && aj_bj + 5 < 80) h_0[(0 + aj_i0) * 80 + 0 + aj_j5] = aj_c0.s5;
  if (aj_bi + 0 < 96 && aj_bj + 6 < 80) h_0[(0 + aj_i0) * 80 + 0 + aj_j6] = aj_c0.s6;
  if (aj_bi + 0 < 96 && aj_bj + 7 < 80) h_0[(0 + aj_i0) * 80 + 0 + aj_j7] = aj_c0.s7;
  if (aj_bi + 1 < 96 && aj_bj + 0 < 80) h_0[(0 + aj_i1) * 80 + 0 + aj_j0] = aj_c1.s0;
  if (aj_bi + 1 < 96 && aj_bj + 1 < 80) h_0[(0 + aj_i1) * 80 + 0 + aj_j1] = aj_c1.s1;
  if (aj_bi + 1 < 96 && aj_bj + 2 < 80) h_0[(0 + aj_i1) * 80 + 0 + aj_j2] = aj_c1.s2;
  if (aj_bi + 1 < 96 && aj_bj + 3 < 80) h_0[(0 + aj_i1) * 80 + 0 + aj_j3] = aj_c1.s3;
  if (aj_bi + 1 < 96 && aj_bj + 4 < 80) h_0[(0 + aj_i1) * 80 + 0 + aj_j4] = aj_c1.s4;
  if (aj_bi + 1 < 96 && aj_bj + 5 < 80) h_0[(0 + aj_i1) * 80 + 0 + aj_j5] = aj_c1.s5;
  if (aj_bi + 1 < 96 && aj_bj + 6 < 80) h_0[(0 + aj_i1) * 80 + 0 + aj_j6] = aj_c1.s6;
  if (aj_bi + 1 < 96 && aj_bj + 7 < 80) h_0[(0 + aj_i1) * 80 + 0 + aj_j7] = aj_c1.s7;
  if (aj_bi + 2 < 96 && aj_bj + 0 < 80) h_0[(0 + aj_i2) * 80 + 0 + aj_j0] = aj_c2.s0;
  if (aj_bi + 2 < 96 && aj_bj + 1 < 80) h_0[(0 + aj_i2) * 80 + 0 + aj_j1] = aj_c2.s1;
  if (aj_bi + 2 < 96 && aj_bj + 2 < 80) h_0[(0 + aj_i2) * 80 + 0 + aj_j2] = aj_c2.s2;
  if (aj_bi + 2 < 96 && aj_bj + 3 < 80) h_0[(0 + aj_i2) * 80 + 0 + aj_j3] = aj_c2.s3;
  if (aj_bi + 2 < 96 && aj_bj + 4 < 80) h_0[(0 + aj_i2) * 80 + 0 + aj_j4] = aj_c2.s4;
  if (aj_bi + 2 < 96 && aj_bj + 5 < 80) h_0[(0 + aj_i2) * 80 + 0 + aj_j5] = aj_c2.s5;
  if (aj_bi + 2 < 96 && aj_bj + 6 < 80) h_0[(0 + aj_i2) * 80 + 0 + aj_j6] = aj_c2.s6;
  if (aj_bi + 2 < 96 && aj_bj + 7 < 80) h_0[(0 + aj_i2) * 80 + 0 + aj_j7] = aj_c2.s7;
  if (aj_bi + 3 < 96 && aj_bj + 0 < 80) h_0[(0 + aj_i3) * 80 + 0 + aj_j0] = aj_c3.s0;
  if (aj_bi + 3 < 96 && aj_bj + 1 < 80) h_0[(0 + aj_i3) * 80 + 0 + aj_j1] = aj_c3.s1;
  if (aj_bi + 3 < 96 && aj_bj + 2 < 80) h_0[(0 + aj_i3) * 80 + 0 + aj_j2] = aj_c3.s2;
  if (aj_bi + 3 < 96 && aj_bj + 3 < 80) h_0[(0 + aj_i3) * 80 + 0 + aj_j3] = aj_c3.s3;
  if (aj_bi + 3 < 96 && aj_bj + 4 < 80) h_0[(0 + aj_i3) * 80 + 0 + aj_j4] = aj_c3.s4;
  if (aj_bi + 3 < 96 && aj_bj + 5 < 80) h_0[(0 + aj_i3) * 80 + 0 + aj_j5] = aj_c3.s5;
  if (aj_bi + 3 < 96 && aj_bj + 6 < 80) h_0[(0 + aj_i3) * 80 + 0 + aj_j6] = aj_c3.s6;
  if (aj_bi + 3 < 96 && aj_bj + 7 < 80) h_0[(0 + aj_i3) * 80 + 0 + aj_j7] = aj_c3.s7;
  if (aj_bi + 4 < 96 && aj_bj + 0 < 80) h_0[(0 + aj_i4) * 80 + 0 + aj_j0] = aj_c4.s0;
  if (aj_bi + 4 < 96 && aj_bj + 1 < 80) h_0[(0 + aj_i4) * 80 + 0 + aj_j1] = aj_c4.s1;
  if (aj_bi + 4 < 96 && aj_bj + 2 < 80) h_0[(0 + aj_i4) * 80 + 0 + aj_j2] = aj_c4.s2;
  if (aj_bi + 4 < 96 && aj_bj + 3 < 80) h_0[(0 + aj_i4) * 80 + 0 + aj_j3] = aj_c4.s3;
  if (aj_bi + 4 < 96 && aj_bj + 4 < 80) h_0[(0 + aj_i4) * 80 + 0 + aj_j4] = aj_c4.s4;
  if (aj_bi + 4 < 96 && aj_bj + 5 < 80) h_0[(0 + aj_i4) * 80 + 0 + aj_j5] = aj_c4.s5;
  if (aj_bi + 4 < 96 && aj_bj + 6 < 80) h_0[(0 + aj_i4) * 80 + 0 + aj_j6] = aj_c4.s6;
  if (aj_bi + 4 < 96 && aj_bj + 7 < 80) h_0[(0 + aj_i4) * 80 + 0 + aj_j7] = aj_c4.s7;
  if (aj_bi + 5 < 96 && aj_bj + 0 < 80) h_0[(0 + aj_i5) * 80 + 0 + aj_j0] = aj_c5.s0;
  if (aj_bi + 5 < 96 && aj_bj + 1 < 80) h_0[(0 + aj_i5) * 80 + 0 + aj_j1] = aj_c5.s1;
  if (aj_bi + 5 < 96 && aj_bj + 2 < 80) h_0[(0 + aj_i5) * 80 + 0 + aj_j2] = aj_c5.s2;
  if (aj_bi + 5 < 96 && aj_bj + 3 < 80) h_0[(0 + aj_i5) * 80 + 0 + aj_j3] = aj_c5.s3;
  if (aj_bi + 5 < 96 && aj_bj + 4 < 80) h_0[(0 + aj_i5) * 80 + 0 + aj_j4] = aj_c5.s4;
  if (aj_bi + 5 < 96 && aj_bj + 5 < 80) h_0[(0 + aj_i5) * 80 + 0 + aj_j5] = aj_c5.s5;
  if (aj_bi + 5 < 96 && aj_bj + 6 < 80) h_0[(0 + aj_i5) * 80 + 0 + aj_j6] = aj_c5.s6;
  if (aj_bi + 5 < 96 && aj_bj + 7 < 80) h_0[(0 + aj_i5) * 80 + 0 + aj_j7] = aj_c5.s7;
  if (aj_bi + 6 < 96 && aj_bj + 0 < 80) h_0[(0 + aj_i6) * 80 + 0 + aj_j0] = aj_c6.s0;
  if (aj_bi + 6 < 96 && aj_bj + 1 < 80) h_0[(0 + aj_i6) * 80 + 0 + aj_j1] = aj_c6.s1;
  if (aj_bi + 6 < 96 && aj_bj + 2 < 80) h_0[(0 + aj_i6) * 80 + 0 + aj_j2] = aj_c6.s2;
  if (aj_bi + 6 < 96 && aj_bj + 3 < 80) h_0[(0 + aj_i6) * 80 + 0 + aj_j3] = aj_c6.s3;
  if (aj_bi + 6 < 96 && aj_bj + 4 < 80) h_0[(0 + aj_i6) * 80 + 0 + aj_j4] = aj_c6.s4;
  if (aj_bi + 6 < 96 && aj_bj + 5 < 80) h_0[(0 + aj_i6) * 80 + 0 + aj_j5] = aj_c6.s5;
  if (aj_bi + 6 < 96 && aj_bj + 6 < 80) h_0[(0 + aj_i6) * 80 + 0 + aj_j6] = aj_c6.s6;
  if (aj_bi + 6 < 96 && aj_bj + 7 < 80) h_0[(0 + aj_i6) * 80 + 0 + aj_j7] = aj_c6.s7;
  if (aj_bi + 7 < 96 && aj_bj + 0 < 80) h_0[(0 + aj_i7) * 80 + 0 + aj_j0] = aj_c7.s0;
  if (aj_bi + 7 < 96 && aj_bj + 1 < 80) h_0[(0 + aj_i7) * 80 + 0 + aj_j1] = aj_c7.s1;
  if (aj_bi + 7 < 96 && aj_bj + 2 < 80) h_0[(0 + aj_i7) * 80 + 0 + aj_j2] = aj_c7.s2;
  if (aj_bi + 7 < 96 && aj_bj + 3 < 80) h_0[(0 + aj_i7) * 80 + 0 + aj_j3] = aj_c7.s3;
  if (aj_bi + 7 < 96 && aj_bj + 4 < 80) h_0[(0 + aj_i7) * 80 + 0 + aj_j4] = aj_c7.s4;
  if (aj_bi + 7 < 96 && aj_bj + 5 < 80) h_0[(0 + aj_i7) * 80 + 0 + aj_j5] = aj_c7.s5;
  if (aj_bi + 7 < 96 && aj_bj + 6 < 80) h_0[(0 + aj_i7) * 80 + 0 + aj_j6] = aj_c7.s6;
  if (aj_bi + 7 < 96 && aj_bj + 7 < 80) h_0[(0 + aj_i7) * 80 + 0 + aj_j7] = aj_c7.s7;
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
