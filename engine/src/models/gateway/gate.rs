//! [`Gate`]: which defences a gateway client stacks, as data — what the parameters,
//! the refusal reasons and the trace name. The behaviour of each gate (entering,
//! release) is in [`super::gates`], which depends on this and not the other way.

stampede_kernel::named_enum! {
    /// The defences, in the order a scenario lists them (outermost first).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Gate {
        /// ① the product ladder, deadline feasibility and tenant share.
        Admission = "admission",
        /// ② slots and a bounded queue per class.
        Bulkhead = "bulkhead",
        /// ③ an adaptive concurrency limit per class (or per tier).
        Adaptive = "adaptive",
        /// ④ a circuit breaker per class.
        Breaker = "breaker",
        /// ⑤ client-side quota meters per tier.
        Quota = "quota",
        /// ⑥ the attempt loop: gates after it are passed once per attempt.
        Retry = "retry",
        /// ⑦ a failed call of a class with a fallback is served its fallback.
        Fallback = "fallback",
    }
}
