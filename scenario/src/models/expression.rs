//! Metric expressions: `useful_usd + wasted_usd`, `turns_degraded / turns_answered`,
//! `2 * a - b` — a claim, `optimize --require`, `compare --metric` or `run --metric`
//! may name one wherever it names a metric. An expression becomes a derived metric: a
//! column computed per replica from the model's own metrics, so its mean, interval
//! and every statistic over replicas are what they would be for a model metric
//! (the interval of a sum is not the sum of the intervals).
//!
//! Grammar: operands (metric names or numbers) and the operators `+ - * /`, each
//! separated by spaces (a metric name may itself hold `-`, `>` and `.`: a graph's edge
//! `api->db.retries`); `*` and `/` bind before `+` and `-`, left to right. Division by
//! zero, like any undefined value, is NaN (an empty cell).

use crate::base::error::{Error, Result};

/// One operand: a metric (its index in the model's metric order) or a number.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Operand {
    Metric(usize),
    Number(f64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

/// A parsed expression: its operands and the operators between them.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricExpr {
    /// The text, with single spaces: the derived metric's name.
    pub text: String,
    operands: Vec<Operand>,
    ops: Vec<Op>,
}

/// A metric name as written, or an expression with single spaces: its column's name.
pub fn normalise(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `text` is an expression rather than a metric name: it has a space.
pub fn is_expression(text: &str) -> bool {
    text.split_whitespace().nth(1).is_some()
}

impl MetricExpr {
    /// Parses `text` against `metrics` (the model's names, in order); `field` names
    /// where it was written, for the error.
    pub fn parse(text: &str, metrics: &[&str], field: &str) -> Result<MetricExpr> {
        let tokens: Vec<&str> = text.split_whitespace().collect();
        let mut operands = Vec::new();
        let mut ops = Vec::new();
        for (i, token) in tokens.iter().enumerate() {
            if i % 2 == 1 {
                ops.push(match *token {
                    "+" => Op::Add,
                    "-" => Op::Sub,
                    "*" => Op::Mul,
                    "/" => Op::Div,
                    other => {
                        return Err(Error::bad_input(format!(
                            "{field} = {text:?}: {other:?} where an operator belongs; an expression is metrics and \
                             numbers joined by + - * / with spaces around each"
                        )))
                    }
                });
                continue;
            }
            if let Ok(number) = token.parse::<f64>().map_err(|_| ()).and_then(|n| n.is_finite().then_some(n).ok_or(()))
            {
                operands.push(Operand::Number(number));
            } else if let Some(index) = metrics.iter().position(|m| m == token) {
                operands.push(Operand::Metric(index));
            } else {
                let near: Vec<&str> =
                    metrics.iter().copied().filter(|m| m.contains(token) || token.contains(m)).take(5).collect();
                return Err(Error::bad_input(format!(
                    "{field} = {text:?}: {token:?} is not a metric of this scenario{}",
                    if near.is_empty() { String::new() } else { format!("; did you mean {}?", near.join(", ")) }
                )));
            }
        }
        if tokens.len().is_multiple_of(2) {
            return Err(Error::bad_input(format!(
                "{field} = {text:?}: an expression ends with a metric or a number, not an operator"
            )));
        }
        Ok(MetricExpr { text: normalise(text), operands, ops })
    }

    /// Whether its value can be below 0 when every metric is at least 0: it subtracts,
    /// or has a negative number.
    pub(crate) fn can_be_negative(&self) -> bool {
        self.ops.contains(&Op::Sub) || self.operands.iter().any(|o| matches!(o, Operand::Number(n) if *n < 0.0))
    }

    /// Its value for one replica's `metrics` (in the model's order).
    pub fn eval(&self, metrics: &[f64]) -> f64 {
        let value = |operand: Operand| match operand {
            Operand::Metric(index) => metrics[index],
            Operand::Number(number) => number,
        };
        // Sum of products: each run of * and / is folded into a term first.
        let mut sum = 0.0;
        let mut sign = 1.0;
        let mut term = value(self.operands[0]);
        for (op, &operand) in self.ops.iter().zip(&self.operands[1..]) {
            match op {
                Op::Mul => term *= value(operand),
                Op::Div => term = divide(term, value(operand)),
                Op::Add | Op::Sub => {
                    sum += sign * term;
                    sign = if *op == Op::Add { 1.0 } else { -1.0 };
                    term = value(operand);
                }
            }
        }
        sum + sign * term
    }
}

fn divide(numerator: f64, denominator: f64) -> f64 {
    if denominator == 0.0 {
        f64::NAN
    } else {
        numerator / denominator
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const METRICS: [&str; 4] = ["a", "b", "api->db.retries", "c"];

    fn eval(text: &str, values: [f64; 4]) -> f64 {
        MetricExpr::parse(text, &METRICS, "test").unwrap().eval(&values)
    }

    #[test]
    fn precedence_left_to_right_and_names_with_dashes() {
        assert_eq!(eval("a + b", [1.0, 2.0, 0.0, 0.0]), 3.0);
        assert_eq!(eval("a - b - c", [10.0, 2.0, 0.0, 3.0]), 5.0);
        assert_eq!(eval("a + b * c", [1.0, 2.0, 0.0, 3.0]), 7.0);
        assert_eq!(eval("a / b / c", [12.0, 2.0, 0.0, 3.0]), 2.0);
        assert_eq!(eval("1000 * a / b", [3.0, 4.0, 0.0, 0.0]), 750.0);
        assert_eq!(eval("api->db.retries - a", [1.0, 0.0, 5.0, 0.0]), 4.0);
        assert!(eval("a / b", [1.0, 0.0, 0.0, 0.0]).is_nan(), "division by zero is undefined");
        assert!(is_expression("a + b") && !is_expression("api->db.retries"));
        let parse = |text: &str| MetricExpr::parse(text, &METRICS, "test").unwrap();
        assert!(parse("a - b").can_be_negative() && parse("-1 * a").can_be_negative());
        assert!(!parse("a / b + 2 * c").can_be_negative());
    }

    #[test]
    fn bad_expressions_say_what_is_wrong() {
        let error = |text: &str| MetricExpr::parse(text, &METRICS, "verify[0].metric").unwrap_err().message;
        assert!(error("a + d").contains("\"d\" is not a metric of this scenario"), "{}", error("a + d"));
        assert!(error("a ^ b").contains("\"^\" where an operator belongs"));
        assert!(error("a +").contains("ends with a metric or a number"));
        assert!(error("a + inf").contains("not a metric"));
    }
}
