// The sum over a workgroup of REDUCE_SIZE invocations (the includer defines it) as a tree in
// shared memory, for the matvec shaders built without subgroup arithmetic. log2(REDUCE_SIZE)
// barriers. The result is valid in invocation 0 only. Two sums at once: x and y.

shared vec2 reducePartial[REDUCE_SIZE];

vec2 workgroupSum(vec2 v)
{
    const uint lane = gl_LocalInvocationID.x;
    reducePartial[lane] = v;
    barrier();
    for (uint s = REDUCE_SIZE / 2u; s > 0u; s >>= 1) {
        if (lane < s) reducePartial[lane] += reducePartial[lane + s];
        barrier();
    }
    return reducePartial[0];
}
