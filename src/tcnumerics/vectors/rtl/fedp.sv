// fedp: a fused dot-product-add unit, d = RZ( sum_i trunc(a_i*b_i) + trunc(c) ), combinational.
//
// L products of (1+EW+MW)-bit floats and an FP32 accumulator c are aligned to the group's
// largest exponent emax (an exactly-zero term counts as ZERO_EXP); every term is truncated
// toward zero to F fraction bits below 2**emax, the truncated terms are summed exactly and
// the sum is rounded once toward zero into FP32 (cut to OUT_M mantissa bits).  NaN in, inf*0
// or +inf with -inf give the canonical NaN 0x7FFFFFFF; a zero result is +0.  FN=1: operands
// without infinities whose NaN is all ones (E4M3).  This is the arithmetic of
// tcnumerics' "fused" UnitModel with output_rounding RZ, for one group (K = L).
module fedp #(
    parameter int L = 4,          // products per group
    parameter int EW = 5,         // operand exponent bits
    parameter int MW = 10,        // operand mantissa bits
    parameter int FN = 0,         // 1: no inf, NaN = all ones (E4M3)
    parameter int F = 23,         // fraction bits kept below emax
    parameter int ZERO_EXP = -131,// exponent of an exactly-zero term
    parameter int OUT_M = 23      // mantissa bits of the FP32 result kept (13: E8M13)
) (
    input  logic [L*(1+EW+MW)-1:0] a,
    input  logic [L*(1+EW+MW)-1:0] b,
    input  logic [31:0]            c,
    output logic [31:0]            d
);
    localparam int IW = 1 + EW + MW;
    localparam int BIAS = (1 << (EW - 1)) - 1;
    localparam logic [EW-1:0] EMAXF = '1;
    localparam logic [MW-1:0] MMAXF = '1;

    // per product: operands taken apart (alignment exponent of a subnormal is the minimum normal one)
    logic [L-1:0]     ai, an, bi, bn, iz, pneg;
    logic [2*MW+1:0]  psig [L];
    int               pexp [L];
    genvar g;
    for (g = 0; g < L; g++) begin : lane
        wire [IW-1:0] x = a[g*IW +: IW];
        wire [IW-1:0] y = b[g*IW +: IW];
        wire [EW-1:0] xe = x[MW +: EW];
        wire [EW-1:0] ye = y[MW +: EW];
        wire [MW:0]   xs = {xe != 0, x[MW-1:0]};
        wire [MW:0]   ys = {ye != 0, y[MW-1:0]};
        wire signed [31:0] xexp = ((xe == 0) ? 1 : int'(xe)) - BIAS;
        wire signed [31:0] yexp = ((ye == 0) ? 1 : int'(ye)) - BIAS;
        assign an[g] = (FN != 0) ? (xe == EMAXF && x[MW-1:0] == MMAXF) : (xe == EMAXF && x[MW-1:0] != 0);
        assign bn[g] = (FN != 0) ? (ye == EMAXF && y[MW-1:0] == MMAXF) : (ye == EMAXF && y[MW-1:0] != 0);
        assign ai[g] = (FN == 0) && xe == EMAXF && x[MW-1:0] == 0;
        assign bi[g] = (FN == 0) && ye == EMAXF && y[MW-1:0] == 0;
        assign pneg[g] = x[IW-1] ^ y[IW-1];
        assign psig[g] = (ai[g] | an[g] | bi[g] | bn[g]) ? '0 : xs * ys;
        assign pexp[g] = (psig[g] == 0) ? ZERO_EXP : xexp + yexp;
        assign iz[g] = (ai[g] && ys == 0) || (bi[g] && xs == 0);   // inf * 0
    end

    logic              sc, pos_inf, neg_inf, nan, neg;
    int                ec, emax, sh, msb, q;
    logic [23:0]       sigc;
    logic signed [63:0] sum, term;
    logic [63:0]       mag, frac;

    always @* begin
        nan = 0; pos_inf = 0; neg_inf = 0;
        for (int i = 0; i < L; i++) begin
            nan = nan | an[i] | bn[i] | iz[i];
            if ((ai[i] | bi[i]) && !pneg[i]) pos_inf = 1;
            if ((ai[i] | bi[i]) && pneg[i]) neg_inf = 1;
        end
        sc = c[31];
        sigc = {c[30:23] != 0, c[22:0]};
        ec = ((c[30:23] == 0) ? 1 : int'(c[30:23])) - 127;
        if (c[30:23] == 8'hFF) begin
            if (c[22:0] != 0) nan = 1;
            else if (sc) neg_inf = 1;
            else pos_inf = 1;
            sigc = 0;
        end
        if (sigc == 0) ec = ZERO_EXP;
        nan = nan | (pos_inf & neg_inf);

        // emax over the products and C
        emax = ec;
        for (int i = 0; i < L; i++) if (pexp[i] > emax) emax = pexp[i];

        // align and truncate every term to a multiple of 2**(emax-F), sum exactly
        sum = 0;
        for (int i = 0; i < L; i++) begin
            sh = emax - pexp[i] + 2 * MW;
            mag = (sh >= 64) ? 64'd0 : ((64'(psig[i]) << F) >> sh);
            term = pneg[i] ? -$signed(mag) : $signed(mag);
            sum = sum + term;
        end
        sh = emax - ec + 23;
        mag = (sh >= 64) ? 64'd0 : ((64'(sigc) << F) >> sh);
        sum = sc ? sum - $signed(mag) : sum + $signed(mag);

        // round sum * 2**(emax-F) toward zero into FP32
        neg = sum < 0;
        mag = neg ? -sum : sum;
        msb = 0;
        frac = 0;  // every path assigns it: no latch
        for (int i = 0; i < 64; i++) if (mag[i]) msb = i;
        q = emax - F;
        if (mag == 0) begin
            d = 32'h0;
        end else if (q + msb > 127) begin
            d = {neg, 8'hFF, 23'h0};
        end else if (q + msb >= -126) begin
            frac = (msb >= 23) ? (mag >> (msb - 23)) : (mag << (23 - msb));
            frac = (frac >> (23 - OUT_M)) << (23 - OUT_M);
            d = {neg, 8'(q + msb + 127), frac[22:0]};
        end else begin
            frac = (q >= -149) ? (mag << (q + 149)) : (mag >> (-149 - q));
            frac = (frac >> (23 - OUT_M)) << (23 - OUT_M);
            d = (frac == 0) ? 32'h0 : {neg, 8'h00, frac[22:0]};
        end
        if (nan) d = 32'h7FFFFFFF;
        else if (pos_inf | neg_inf) d = {neg_inf, 8'hFF, 23'h0};
    end
endmodule
