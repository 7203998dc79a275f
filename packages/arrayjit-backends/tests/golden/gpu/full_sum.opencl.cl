/* launches:
   aj_full_sum_k0: global 65536, local 256
   aj_full_sum_k1: global 256, local 256
*/
/* routine full_sum */
__kernel void aj_full_sum_k0(__global unsigned char* p_x_1, const unsigned long o_x_1, __global unsigned char* p_partials0, const unsigned long o_partials0) {
  __global float* restrict x_1 = (__global float*)(p_x_1 + o_x_1);
  __global float* restrict partials0 = (__global float*)(p_partials0 + o_partials0);
  const int aj_lid = (int)get_local_id(0);
  float aj_acc = ((float)-0.0);
  for (long aj_g = (long)get_group_id(0) * 256 + aj_lid; aj_g < 65536; aj_g += 65536) {
    uint32_t aj_r = ((uint32_t)aj_g);
    const long i5 = 0 + (long)(aj_r % 64u); aj_r /= 64u;
    const long i4 = 0 + (long)(aj_r % 2u); aj_r /= 2u;
    const long i3 = 0 + (long)(aj_r % 2u); aj_r /= 2u;
    const long i2 = 0 + (long)(aj_r % 2u); aj_r /= 2u;
    const long i1 = 0 + (long)(aj_r % 2u); aj_r /= 2u;
    const long i0 = 0 + (long)aj_r;
    aj_acc = ((float)(aj_acc + ((float)x_1[(1024 * i0 + 512 * i1 + 256 * i2 + 128 * i3 + 64 * i4 + i5)])));
  }
  __local float aj_sh[256];
  aj_sh[aj_lid] = aj_acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int aj_s = 128; aj_s > 0; aj_s >>= 1) {
    if (aj_lid < aj_s) aj_sh[aj_lid] = ((float)(aj_sh[aj_lid] + aj_sh[aj_lid + aj_s]));
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (aj_lid == 0) partials0[get_group_id(0)] = aj_sh[0];
}
__kernel void aj_full_sum_k1(__global unsigned char* p_partials0, const unsigned long o_partials0, __global unsigned char* p_s_0, const unsigned long o_s_0) {
  __global float* restrict partials0 = (__global float*)(p_partials0 + o_partials0);
  __global float* restrict s_0 = (__global float*)(p_s_0 + o_s_0);
  const int aj_lid = (int)get_local_id(0);
  float aj_acc = ((float)-0.0);
  for (int aj_g = aj_lid; aj_g < 256; aj_g += 256)
    aj_acc = ((float)(aj_acc + partials0[aj_g]));
  __local float aj_sh[256];
  aj_sh[aj_lid] = aj_acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int aj_s = 128; aj_s > 0; aj_s >>= 1) {
    if (aj_lid < aj_s) aj_sh[aj_lid] = ((float)(aj_sh[aj_lid] + aj_sh[aj_lid + aj_s]));
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (aj_lid == 0) s_0[0] = ((float)(((float)0.0) + aj_sh[0]));
}
