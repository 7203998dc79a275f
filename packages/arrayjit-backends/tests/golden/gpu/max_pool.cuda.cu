/* launches:
   aj_max_pool_k0: global 800, local None
*/
/* routine max_pool */
extern "C" __global__ void aj_max_pool_k0(float* __restrict__ p_0, float* __restrict__ x_1) {
  const long long aj_gid = (long long)(blockIdx.x * (long long)blockDim.x + threadIdx.x);
  if (aj_gid >= 800) return;
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long long i3 = 0 + (long long)(aj_r % 8u); aj_r /= 8u;
  const long long i2 = 0 + (long long)(aj_r % 5u); aj_r /= 5u;
  const long long i1 = 0 + (long long)(aj_r % 5u); aj_r /= 5u;
  const long long i0 = 0 + (long long)aj_r;
  p_0[(((i0) * 5 + i1) * 5 + i2) * 8 + i3] = ((float)(-INFINITY));
  {
    float acc1 = ((float)p_0[(((i0) * 5 + i1) * 5 + i2) * 8 + i3]);
    for (long long i4 = 0; i4 <= 1; ++i4) {
      for (long long i5 = 0; i5 <= 1; ++i5) {
        acc1 = ((float)aj_fmaxf(acc1, ((float)x_1[(((i0) * 10 + (2 * i1 + i4)) * 10 + (2 * i2 + i5)) * 8 + i3])));
      }
    }
    p_0[(((i0) * 5 + i1) * 5 + i2) * 8 + i3] = acc1;
  }
}
