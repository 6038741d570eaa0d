
mlp1seed*
xFP33:abcd