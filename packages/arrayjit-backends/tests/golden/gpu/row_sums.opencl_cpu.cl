/* launches:
   aj_row_sums_k0: global 64, local None
*/
/* routine row_sums */
__kernel void aj_row_sums_k0(__global unsigned char* p_s_0, const unsigned long o_s_0, __global unsigned char* p_x_1, const unsigned long o_x_1) {
  __global float* restrict s_0 = (__global float*)(p_s_0 + o_s_0);
  __global float* restrict x_1 = (__global float*)(p_x_1 + o_x_1);
  const long aj_gid = (long)get_global_id(0);
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long i0 = 0 + (long)aj_r;
  s_0[i0] = ((float)0.0);
  for (long i1 = 0; i1 <= 45; ++i1) {
    {
      float v0_s = ((float)-0.0);
      for (long i2 = 0; i2 <= 63; ++i2) {
        v0_s = ((float)(((float)v0_s) + ((float)x_1[(i0) * 3000 + (64 * i1 + i2)])));
      }
      s_0[i0] = ((float)(((float)s_0[i0]) + ((float)v0_s)));
    }
  }
  {
    float v1_s = ((float)-0.0);
    for (long i3 = 0; i3 <= 55; ++i3) {
      v1_s = ((float)(((float)v1_s) + ((float)x_1[(i0) * 3000 + (i3 + 2944)])));
    }
    s_0[i0] = ((float)(((float)s_0[i0]) + ((float)v1_s)));
  }
}
