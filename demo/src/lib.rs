//! budget-demo: demo services and scenarios for budget-top.
