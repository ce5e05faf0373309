int32_t mm(int64_t M, const float* A, const float* B, float* C);
double mm_time(int64_t M, const float* A, const float* B, float* C, int32_t number);
void mm_set_num_threads(int32_t n);
int32_t mm_v0(int64_t M, const float* A, const float* B, float* C);
double mm_v0_time(int64_t M, const float* A, const float* B, float* C, int32_t number);
void mm_v0_set_num_threads(int32_t n);
int32_t mm_v1(int64_t M, const float* A, const float* B, float* C);
double mm_v1_time(int64_t M, const float* A, const float* B, float* C, int32_t number);
void mm_v1_set_num_threads(int32_t n);
