/* launches:
   aj_elementwise_chain_k0: global 1000, local None
*/
/* routine elementwise_chain */
extern "C" __global__ void aj_elementwise_chain_k0(float* __restrict__ a_0, float* __restrict__ b_1, float* __restrict__ c_2, float* __restrict__ y_3) {
  const long long aj_gid = (long long)(blockIdx.x * (long long)blockDim.x + threadIdx.x);
  if (aj_gid >= 1000) return;
  uint32_t aj_r = ((uint32_t)aj_gid);
  const long long i0 = 0 + (long long)aj_r;
  {
    const float t1 = ((float)(((float)(((float)a_0[i0]) * ((float)b_1[i0]))) + ((float)c_2[i0])));
    y_3[i0] = ((float)(!(t1 <= 0) ? t1 : 0));
  }
}
