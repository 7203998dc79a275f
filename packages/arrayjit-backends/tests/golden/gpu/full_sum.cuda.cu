/* launches:
   aj_full_sum_k0: global 65536, local 256
   aj_full_sum_k1: global 256, local 256
*/
/* routine full_sum */
extern "C" __global__ void aj_full_sum_k0(float* __restrict__ x_1, float* __restrict__ partials0) {
  const int aj_lid = (int)threadIdx.x;
  float aj_acc = ((float)-0.0);
  for (long long aj_g = (long long)blockIdx.x * 256 + aj_lid; aj_g < 65536; aj_g += 65536) {
    uint32_t aj_r = ((uint32_t)aj_g);
    const long long i5 = 0 + (long long)(aj_r % 64u); aj_r /= 64u;
    const long long i4 = 0 + (long long)(aj_r % 2u); aj_r /= 2u;
    const long long i3 = 0 + (long long)(aj_r % 2u); aj_r /= 2u;
    const long long i2 = 0 + (long long)(aj_r % 2u); aj_r /= 2u;
    const long long i1 = 0 + (long long)(aj_r % 2u); aj_r /= 2u;
    const long long i0 = 0 + (long long)aj_r;
    aj_acc = ((float)(aj_acc + ((float)x_1[(1024 * i0 + 512 * i1 + 256 * i2 + 128 * i3 + 64 * i4 + i5)])));
  }
  __shared__ float aj_sh[256];
  aj_sh[aj_lid] = aj_acc;
  __syncthreads();
  for (int aj_s = 128; aj_s > 0; aj_s >>= 1) {
    if (aj_lid < aj_s) aj_sh[aj_lid] = ((float)(aj_sh[aj_lid] + aj_sh[aj_lid + aj_s]));
    __syncthreads();
  }
  if (aj_lid == 0) partials0[blockIdx.x] = aj_sh[0];
}
extern "C" __global__ void aj_full_sum_k1(float* __restrict__ partials0, float* __restrict__ s_0) {
  const int aj_lid = (int)threadIdx.x;
  float aj_acc = ((float)-0.0);
  for (int aj_g = aj_lid; aj_g < 256; aj_g += 256)
    aj_acc = ((float)(aj_acc + partials0[aj_g]));
  __shared__ float aj_sh[256];
  aj_sh[aj_lid] = aj_acc;
  __syncthreads();
  for (int aj_s = 128; aj_s > 0; aj_s >>= 1) {
    if (aj_lid < aj_s) aj_sh[aj_lid] = ((float)(aj_sh[aj_lid] + aj_sh[aj_lid + aj_s]));
    __syncthreads();
  }
  if (aj_lid == 0) s_0[0] = ((float)(((float)0.0) + aj_sh[0]));
}
