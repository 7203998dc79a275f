/* launches:
   aj_full_sum_k0: global 64, local 1
   aj_full_sum_k1: global 1, local 1
*/
/* routine full_sum */
__kernel void aj_full_sum_k0(__global unsigned char* p_x_1, const unsigned long o_x_1, __global unsigned char* p_partials0, const unsigned long o_partials0) {
  __global float* restrict x_1 = (__global float*)(p_x_1 + o_x_1);
  __global float* restrict partials0 = (__global float*)(p_partials0 + o_partials0);
  const long aj_w = (long)get_global_id(0);
  const long aj_lo = 0 + aj_w * 1;
  const long aj_end = aj_lo + 1 < 64 ? aj_lo + 1 : 64;
  float aj_acc = ((float)-0.0);
  for (long i0 = aj_lo; i0 < aj_end; ++i0) {
    float v0_s = ((float)-0.0);
    for (long i1 = 0; i1 <= 1; ++i1) {
      {
        float v1_s = ((float)-0.0);
        for (long i2 = 0; i2 <= 1; ++i2) {
          {
            float v2_s = ((float)-0.0);
            for (long i3 = 0; i3 <= 1; ++i3) {
              {
                float v3_s = ((float)-0.0);
                for (long i4 = 0; i4 <= 1; ++i4) {
                  {
                    float v4_s = ((float)-0.0);
                    for (long i5 = 0; i5 <= 63; ++i5) {
                      v4_s = ((float)(((float)v4_s) + ((float)x_1[(1024 * i0 + 512 * i1 + 256 * i2 + 128 * i3 + 64 * i4 + i5)])));
                    }
                    v3_s = ((float)(((float)v3_s) + ((float)v4_s)));
                  }
                }
                v2_s = ((float)(((float)v2_s) + ((float)v3_s)));
              }
            }
            v1_s = ((float)(((float)v1_s) + ((float)v2_s)));
          }
        }
        v0_s = ((float)(((float)v0_s) + ((float)v1_s)));
      }
    }
    aj_acc = ((float)(aj_acc + ((float)v0_s)));
  }
  partials0[aj_w] = aj_acc;
}
__kernel void aj_full_sum_k1(__global unsigned char* p_partials0, const unsigned long o_partials0, __global unsigned char* p_s_0, const unsigned long o_s_0) {
  __global float* restrict partials0 = (__global float*)(p_partials0 + o_partials0);
  __global float* restrict s_0 = (__global float*)(p_s_0 + o_s_0);
  float aj_acc = ((float)0.0);
  for (int aj_w = 0; aj_w < 64; ++aj_w)
    aj_acc = ((float)(aj_acc + partials0[aj_w]));
  s_0[0] = aj_acc;
}
