mod forget;
mod harness;
mod network;
mod unit;
