"""The calibration of the substrate: the rows it was fitted to, what a measurement of them runs, the freeze rule that
chose a trial, and the substrates the studies froze or measured.

Every row is a number chapter 10 prints at chapter 9's settings (the RL base, the unregularised run, the single 10.6
batch at clip_high 0.2); every regularised setting of the chapter was held out of the fit.
"""
