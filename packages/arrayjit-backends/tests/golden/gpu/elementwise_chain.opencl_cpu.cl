/* launches:
   aj_elementwise_chain_k0: global 1000, local None
*/
/* routine elementwise_chain */
__kernel void aj_elementwise_chain_k0(__global unsigned char* p_a_0, const unsigned long o_a_0, __global unsigned char* p_b_1, const unsigned long o_b_1, __global unsigned char* p_c_2, const unsigned long o_c_2, __global unsigned char* p_y_3, const unsigned long o_y_3) {
  __global float* restrict a_0 = (__global float*)(p_a_0 + o_a_0);
  __global float* restrict b_1 = (__global float*)(p_b_1 + o_b_1);
  __global float* restrict c_2 = (__global float*)(p_c_2 + o_c_2);
  __global float* restrict y_3 = (__global float*)(p_y_3 + o_y_3);
  const long aj_gid = (long)get_global_id(0);
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long i0 = 0 + (long)aj_r;
  {
    const float t1 = ((float)(((float)(((float)a_0[i0]) * ((float)b_1[i0]))) + ((float)c_2[i0])));
    y_3[i0] = ((float)(!(t1 <= 0) ? t1 : 0));
  }
}
