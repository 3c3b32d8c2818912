mod harness;
mod network;
mod unit;
