set terminal pngcairo size 900,520 font "sans,11"
set output 'push-bandwidth.png'
set title "GPU-initiated push vs host-issued copies, 2 x H200 (NV18), one process per GPU"
set logscale x 2
set logscale y 10
set xlabel "block size (KiB)"
set ylabel "GB/s (one direction)"
set key right bottom box opaque
set grid
set yrange [0.05:800]
set xrange [3.5:20000]
set xtics ("4" 4, "16" 16, "64" 64, "256" 256, "1M" 1024, "4M" 4096, "16M" 16384)
plot 395.6 title "link ceiling: one 1 GiB cudaMemcpyAsync (395.6)" with lines dt 2 lw 2, \
     'push-bandwidth.dat' using 1:2 title "nvlink push, one way" with linespoints lw 2 pt 7, \
     'push-bandwidth.dat' using 1:3 title "nvlink push, both ways (each direction)" with linespoints lw 2 pt 5, \
     'push-bandwidth.dat' using 1:4 title "host cudaMemcpyAsync per block" with linespoints lw 2 pt 9, \
     'push-bandwidth.dat' using 1:5 title "proxy push (first slice, see text)" with linespoints lw 2 pt 11
