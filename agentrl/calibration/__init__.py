"""The calibration of the substrate: the rows it was fitted to, what a measurement of them runs, the freeze rule that
chose a trial, and the substrates the studies froze or measured.

Every row is a number chapter 10 shows of the RL base, the unregularised run or the single 10.6 batch at clip_high
0.2 (pushed at 10.6's own learning rate); most are printed in its output blocks, the others stated in its prose or
derived. Only the regularised settings of the chapter were held out of the fit (TINYAGENT.md).
"""
