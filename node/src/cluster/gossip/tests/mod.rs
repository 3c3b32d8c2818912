mod forget;
mod harness;
mod network;
mod quorum;
mod unit;
