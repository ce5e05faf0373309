#include <stdio.h>
__attribute__((noinline)) float f(const float* A) {
  float s = 0.0f;
  for (long ri = 0; ri < 9; ++ri)
    for (long a = 0; a < 2; ++a)
      for (long b = 0; b < 4; ++b)
        if (b * 2 + a < 7) s = s + A[ri * 7 + b * 2 + a] * A[ri * 7 + b * 2 + a];
  return s;
}
int main(){ float A[63]; double s=0; for(int i=0;i<63;i++){A[i]=(i%5)-2.0f; s+=A[i]*A[i];} printf("%f %f\n", f(A), s); }
