/* launches:
   aj_max_pool_k0: global 800, local None
*/
/* routine max_pool */
__kernel void aj_max_pool_k0(__global unsigned char* p_p_0, const unsigned long o_p_0, __global unsigned char* p_x_1, const unsigned long o_x_1) {
  __global float* restrict p_0 = (__global float*)(p_p_0 + o_p_0);
  __global float* restrict x_1 = (__global float*)(p_x_1 + o_x_1);
  const long aj_gid = (long)get_global_id(0);
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long i3 = 0 + (long)(aj_r % 8u); aj_r /= 8u;
  const long i2 = 0 + (long)(aj_r % 5u); aj_r /= 5u;
  const long i1 = 0 + (long)(aj_r % 5u); aj_r /= 5u;
  const long i0 = 0 + (long)aj_r;
  p_0[(((i0) * 5 + i1) * 5 + i2) * 8 + i3] = ((float)(-INFINITY));
  {
    float acc1 = ((float)p_0[(((i0) * 5 + i1) * 5 + i2) * 8 + i3]);
    for (long i4 = 0; i4 <= 1; ++i4) {
      for (long i5 = 0; i5 <= 1; ++i5) {
        acc1 = ((float)aj_fmaxf(acc1, ((float)x_1[(((i0) * 10 + (2 * i1 + i4)) * 10 + (2 * i2 + i5)) * 8 + i3])));
      }
    }
    p_0[(((i0) * 5 + i1) * 5 + i2) * 8 + i3] = acc1;
  }
}
