// A JVM server (the JDK's own com.sun.net.httpserver on NIO: epoll, accept, read, write through
// libc) for crates/cli/tests/preload.rs, run as a single source file (`java JvmHttp.java`).
// GET /big answers SIZE bytes of 'x'; POST /echo answers the request body; it serves on a pool
// of 4 threads for SECONDS, then exits 0. Prints "serving PORT" once it listens.
//
// usage: java JvmHttp.java PORT SIZE SECONDS
import com.sun.net.httpserver.HttpExchange;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.concurrent.Executors;

public class JvmHttp {
    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        int size = Integer.parseInt(args[1]);
        long seconds = Long.parseLong(args[2]);
        byte[] big = new byte[size];
        Arrays.fill(big, (byte) 'x');
        var server = com.sun.net.httpserver.HttpServer.create(new InetSocketAddress(port), 128);
        server.createContext("/big", ex -> reply(ex, big));
        server.createContext("/echo", ex -> {
            try (InputStream in = ex.getRequestBody()) {
                reply(ex, in.readAllBytes());
            }
        });
        server.setExecutor(Executors.newFixedThreadPool(4));
        server.start();
        System.out.println("serving " + port);
        System.out.flush();
        Thread.sleep(seconds * 1000);
        server.stop(0);
        System.exit(0);
    }

    static void reply(HttpExchange ex, byte[] body) throws java.io.IOException {
        ex.sendResponseHeaders(200, body.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(body);
        }
    }
}
