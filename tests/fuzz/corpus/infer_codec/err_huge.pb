
mlp1seed*
xFP32€€€€€ €€€€€ :abcd