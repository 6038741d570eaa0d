
mlp1seed*
xINT8:ÿ