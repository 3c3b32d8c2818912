mod unit;
