//! What both Rust peers share: the M/M/c's parameters from the command line, a
//! xoshiro256++ generator (the family stampede uses), the exponential draw
//! (`-ln(U)/rate`, as stampede's), and the one JSON line each peer prints.

/// `λ μ c horizon_s warmup_s replicas seed`, from the command line.
pub struct Params {
    pub arrival_rate: f64,
    pub service_rate: f64,
    pub servers: usize,
    pub horizon_s: f64,
    pub warmup_s: f64,
    pub replicas: u64,
    pub seed: u64,
}

impl Params {
    pub fn from_args() -> Params {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let number = |i: usize| -> f64 {
            args.get(i).and_then(|a| a.parse().ok()).unwrap_or_else(|| {
                eprintln!("usage: LAMBDA MU SERVERS HORIZON_S WARMUP_S REPLICAS SEED");
                std::process::exit(2)
            })
        };
        Params {
            arrival_rate: number(0),
            service_rate: number(1),
            servers: number(2) as usize,
            horizon_s: number(3),
            warmup_s: number(4),
            replicas: number(5) as u64,
            seed: number(6) as u64,
        }
    }
}

/// xoshiro256++ seeded by splitmix64 (Blackman and Vigna).
pub struct Rng([u64; 4]);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut state = seed;
        let mut next = || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng([next(), next(), next(), next()])
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform on (0, 1].
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// Exponential with `rate`, in seconds.
    pub fn exponential(&mut self, rate: f64) -> f64 {
        -self.uniform().ln() / rate
    }
}

/// The line every peer prints: events handled, wall seconds, mean wait in queue.
pub fn report(name: &str, events: u64, seconds: f64, mean_wait_s: f64) {
    println!(
        "{{\"peer\": \"{name}\", \"events\": {events}, \"seconds\": {seconds:.6}, \"mean_wait_s\": {mean_wait_s:.9}}}"
    );
}
