/* launches:
   aj_row_sums_k0: global 16384, local 256
*/
/* routine row_sums */
extern "C" __global__ void aj_row_sums_k0(float* __restrict__ x_1, float* __restrict__ s_0) {
  __shared__ float aj_sh[256];
  const int aj_lid = (int)threadIdx.x;
  uint32_t aj_r = ((uint32_t)blockIdx.x);
  const long long i0 = 0 + (long long)aj_r;
  float aj_acc = ((float)-0.0);
  {
    for (long long aj_t = aj_lid; aj_t < 2944; aj_t += 256) {
      uint32_t aj_r = ((uint32_t)aj_t);
      const long long i2 = 0 + (long long)(aj_r % 64u); aj_r /= 64u;
      const long long i1 = 0 + (long long)aj_r;
      aj_acc = ((float)(aj_acc + ((float)x_1[(i0) * 3000 + (64 * i1 + i2)])));
    }
  }
  {
    for (long long aj_t = aj_lid; aj_t < 56; aj_t += 256) {
      uint32_t aj_r = ((uint32_t)aj_t);
      const long long i3 = 0 + (long long)aj_r;
      aj_acc = ((float)(aj_acc + ((float)x_1[(i0) * 3000 + (i3 + 2944)])));
    }
  }
  aj_sh[aj_lid] = aj_acc;
  __syncthreads();
  for (int aj_s = 128; aj_s > 0; aj_s >>= 1) {
    if (aj_lid < aj_s) aj_sh[aj_lid] = ((float)(aj_sh[aj_lid] + aj_sh[aj_lid + aj_s]));
    __syncthreads();
  }
  if (aj_lid == 0) s_0[i0] = ((float)(((float)0.0) + aj_sh[0]));
}
