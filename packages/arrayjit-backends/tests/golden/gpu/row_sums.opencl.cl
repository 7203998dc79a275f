/* launches:
   aj_row_sums_k0: global 16384, local 256
*/
/* routine row_sums */
__kernel void aj_row_sums_k0(__global unsigned char* p_x_1, const unsigned long o_x_1, __global unsigned char* p_s_0, const unsigned long o_s_0) {
  __global float* restrict x_1 = (__global float*)(p_x_1 + o_x_1);
  __global float* restrict s_0 = (__global float*)(p_s_0 + o_s_0);
  __local float aj_sh[256];
  const int aj_lid = (int)get_local_id(0);
  uint32_t aj_r = ((uint32_t)get_group_id(0));
  const long i0 = 0 + (long)aj_r;
  float aj_acc = ((float)-0.0);
  {
    for (long aj_t = aj_lid; aj_t < 2944; aj_t += 256) {
      uint32_t aj_r = ((uint32_t)aj_t);
      const long i2 = 0 + (long)(aj_r % 64u); aj_r /= 64u;
      const long i1 = 0 + (long)aj_r;
      aj_acc = ((float)(aj_acc + ((float)x_1[(i0) * 3000 + (64 * i1 + i2)])));
    }
  }
  {
    for (long aj_t = aj_lid; aj_t < 56; aj_t += 256) {
      uint32_t aj_r = ((uint32_t)aj_t);
      const long i3 = 0 + (long)aj_r;
      aj_acc = ((float)(aj_acc + ((float)x_1[(i0) * 3000 + (i3 + 2944)])));
    }
  }
  aj_sh[aj_lid] = aj_acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int aj_s = 128; aj_s > 0; aj_s >>= 1) {
    if (aj_lid < aj_s) aj_sh[aj_lid] = ((float)(aj_sh[aj_lid] + aj_sh[aj_lid + aj_s]));
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (aj_lid == 0) s_0[i0] = ((float)(((float)0.0) + aj_sh[0]));
}
